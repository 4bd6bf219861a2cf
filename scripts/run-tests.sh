#!/usr/bin/env bash
# Runs every test tier. First it says which lock the virtualenv holds, and fails when the virtualenv holds
# anything else (a package added, removed or at another version than requirements/dev.lock). The
# real-cluster tier's binaries (Kubernetes, etcd, kwok, and the kubelet the guest runs) and promtool are
# built next from the pinned Go modules in tools/ (once per machine; later runs reuse them), so a missing
# Go toolchain or a failed build stops the run here with the build's reason, before any test. The guest
# tier's prerequisites (QEMU, busybox-static, cpio, socat and the Debian kernel package) are installed
# next by scripts/install-guest.sh, also once per machine; a failure there stops the run too. pytest's
# exit code 5 ("no tests collected") is a failure: a run that tested nothing must not look green.
set -uo pipefail
bin=${1:-.venv/bin}
start=$(date +%s)
"$bin/python" -m koordpy_testkit.lockfile installed requirements/dev.lock || exit 1
if ! KOORDPY_K8S_BIN=$(bash tools/build.sh); then
  echo "the real-cluster tier's binaries could not be built (messages above): failing" >&2
  exit 1
fi
export KOORDPY_K8S_BIN
echo "real-cluster binaries: $KOORDPY_K8S_BIN (ready after $(( $(date +%s) - start )) s)"
if ! KOORDPY_PROMETHEUS_BIN=$(bash tools/build-prometheus.sh); then
  echo "promtool could not be built (messages above): failing" >&2
  exit 1
fi
export KOORDPY_PROMETHEUS_BIN
echo "promtool: $KOORDPY_PROMETHEUS_BIN (ready after $(( $(date +%s) - start )) s)"
if ! KOORDPY_KUBELET_BIN=$(bash tools/build-kubelet.sh); then
  echo "the guest's kubelet could not be built (messages above): failing" >&2
  exit 1
fi
export KOORDPY_KUBELET_BIN
if ! KOORDPY_GUEST_DIR=$(bash scripts/install-guest.sh); then
  echo "the guest tier's prerequisites could not be installed (messages above): failing" >&2
  exit 1
fi
export KOORDPY_GUEST_DIR
echo "guest kernel: $KOORDPY_GUEST_DIR (ready after $(( $(date +%s) - start )) s)"
"$bin/pytest" -q -p no:cacheprovider -n 2 --durations=25 tests
rc=$?
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
