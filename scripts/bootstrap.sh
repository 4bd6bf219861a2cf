#!/usr/bin/env bash
# Creates the project virtualenv and installs what a make target needs, and no more, at the locked
# versions (requirements/*.lock, written by `make lock` from pyproject.toml's ranges):
#   run  koordpy and its runtime dependencies (`make demo`): requirements/run.lock;
#   dev  plus the dev tools and the test support (`make lint`, the tests, the benches): requirements/dev.lock.
# pip installs the lock with --require-hashes and without resolving anything (--no-deps: the lock is the
# whole set), then koordpy itself (editable, built by the lock's setuptools, no other package fetched).
# helm and kubectl, which only the chart, system and cluster tests use, come from scripts/install-helm.sh
# (`make test` runs it); a platform it cannot serve still gets `make demo` and `make lint`.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
mode=${3:-dev}
case "$mode" in
  run|dev) lock="requirements/$mode.lock" ;;
  *) echo "bootstrap.sh: mode must be run or dev, got '$mode'" >&2; exit 2 ;;
esac
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip --disable-pip-version-check)
echo "bootstrap.sh: installing the locked versions of $lock (sha256 $(sha256sum "$lock" | cut -c1-12))"
"${pip[@]}" install --quiet --require-hashes --no-deps --only-binary :all: -r "$lock"
"${pip[@]}" install --quiet --no-deps --no-build-isolation -e .
# A virtualenv made from an older lock (or by hand) may hold packages the lock does not name: remove them,
# so the virtualenv holds the lock and koordpy, nothing else (a run-mode install keeps the dev tools of an
# earlier dev-mode one: dev.lock names them).
extraneous=$("$venv/bin/python" - requirements/dev.lock <<'PY'
import importlib.metadata
import re
import sys

def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()

with open(sys.argv[1]) as f:
    locked = {canonical(m[1]) for line in f if (m := re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==", line))}
installed = {canonical(d.metadata["Name"]) for d in importlib.metadata.distributions()}
print(" ".join(sorted(installed - locked - {"koordpy"})))
PY
)
if [ -n "$extraneous" ]; then
  echo "bootstrap.sh: removing packages the lock does not name: $extraneous"
  # shellcheck disable=SC2086  # a word list on purpose
  "${pip[@]}" uninstall --quiet --yes $extraneous
fi
if [ "$mode" = dev ]; then
  # Test support (tests/support/koordpy_testkit: builders, fake clock, API emulator) is importable in
  # this virtualenv for the tests, the bench scripts and the processes they start, but is not part of
  # koordpy's wheel or image.
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$(pwd)/tests/support" > "$site/koordpy-testkit.pth"
fi
