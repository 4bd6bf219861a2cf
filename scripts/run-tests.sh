#!/usr/bin/env bash
# Runs every test tier. First it says which lock the virtualenv holds, and fails when the virtualenv holds
# anything else (a package added, removed or at another version than requirements/dev.lock). The
# real-cluster tier's binaries (Kubernetes, etcd, kwok), Prometheus and promtool, and the kubelet the guest
# runs are built next from the pinned Go modules in tools/ (once per machine; later runs reuse them), so a
# missing Go toolchain or a failed build stops the run here with the build's reason, before any test. Each
# step prints its own time as it ends (a first run's figures are the cold ones). The guest
# tier's prerequisites (QEMU, busybox-static, cpio, socat and the Debian kernel package) are installed
# next by scripts/install-guest.sh, also once per machine; a failure there stops the run too. pytest's
# exit code 5 ("no tests collected") is a failure: a run that tested nothing must not look green.
set -uo pipefail
bin=${1:-.venv/bin}
start=$(date +%s)
"$bin/python" -m koordpy_testkit.lockfile installed requirements/dev.lock || exit 1
step=$(date +%s)
lap() {  # $lap: the seconds since the previous step ended, and the set-up's total so far
  local now
  now=$(date +%s)
  lap="$((now - step)) s; set-up $((now - start)) s so far"
  step=$now
}
if ! KOORDPY_K8S_BIN=$(bash tools/build.sh); then
  echo "the real-cluster tier's binaries could not be built (messages above): failing" >&2
  exit 1
fi
export KOORDPY_K8S_BIN
lap
echo "real-cluster binaries: $KOORDPY_K8S_BIN ($lap)"
if ! KOORDPY_PROMETHEUS_BIN=$(bash tools/build-prometheus.sh); then
  echo "Prometheus and promtool could not be built (messages above): failing" >&2
  exit 1
fi
export KOORDPY_PROMETHEUS_BIN
lap
echo "prometheus and promtool: $KOORDPY_PROMETHEUS_BIN ($lap)"
if ! KOORDPY_KUBELET_BIN=$(bash tools/build-kubelet.sh); then
  echo "the guest's kubelet could not be built (messages above): failing" >&2
  exit 1
fi
export KOORDPY_KUBELET_BIN
lap
echo "kubelet: $KOORDPY_KUBELET_BIN ($lap)"
if ! KOORDPY_GUEST_DIR=$(bash scripts/install-guest.sh); then
  echo "the guest tier's prerequisites could not be installed (messages above): failing" >&2
  exit 1
fi
export KOORDPY_GUEST_DIR
lap
echo "guest kernel: $KOORDPY_GUEST_DIR ($lap)"
"$bin/pytest" -q -p no:cacheprovider -n 2 --durations=25 tests
rc=$?
echo "pytest: exit code $rc after $(($(date +%s) - step)) s; scripts/run-tests.sh $(($(date +%s) - start)) s in all"
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$rc"
