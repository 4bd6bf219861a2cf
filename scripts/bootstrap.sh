#!/usr/bin/env bash
# Creates the project virtualenv and installs what a make target needs, and no more:
#   run  koordpy and its runtime dependencies (`make demo`);
#   dev  plus the dev tools and the test support (`make lint`, the tests, the benches).
# helm and kubectl, which only the chart, system and cluster tests use, come from scripts/install-helm.sh
# (`make test` runs it); a platform it cannot serve still gets `make demo` and `make lint`.
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
mode=${3:-dev}
case "$mode" in
  run) spec='.' ;;
  dev) spec='.[dev]' ;;
  *) echo "bootstrap.sh: mode must be run or dev, got '$mode'" >&2; exit 2 ;;
esac
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$spec"
if [ "$mode" = dev ]; then
  # Test support (tests/support/koordpy_testkit: builders, fake clock, API emulator) is importable in
  # this virtualenv for the tests, the bench scripts and the processes they start, but is not part of
  # koordpy's wheel or image.
  site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  echo "$(pwd)/tests/support" > "$site/koordpy-testkit.pth"
fi
