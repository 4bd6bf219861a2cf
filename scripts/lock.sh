#!/usr/bin/env bash
# `make lock`: resolves pyproject.toml's ranges once and writes the lock every install path installs from.
#
#   requirements/dev.lock  the resolution: koordpy's runtime dependencies, the dev extra, the build
#                          requirements ([build-system] requires) and pip itself
#   requirements/run.lock  the same versions and hashes, restricted to what runs koordpy (runtime
#                          dependencies, build requirements, pip): `make demo` and the image
#
# Both are universal (one file for every platform koordpy supports, with environment markers) for
# Python 3.11 (requires-python's floor, the image's Python), and carry every file's sha256, so pip
# installs them with --require-hashes. run.lock is resolved with dev.lock as its constraints, so the two
# never name different versions (tests/unit/test_lock.py checks that, and that the lock agrees with
# pyproject.toml). Needs uv (a dev dependency: `make .venv/.dev-installed`) and the package index.
#
# usage: scripts/lock.sh [UV]   (UV: the uv binary, default .venv/bin/uv)
set -euo pipefail
uv=${1:-.venv/bin/uv}
python_version=3.11
[ -x "$uv" ] || { echo "lock.sh: $uv not found: run make .venv/.dev-installed first" >&2; exit 1; }
mkdir -p requirements
# The build requirements and pip, pinned like everything else (pip installs the rest; setuptools builds
# koordpy's wheel and editable install without build isolation).
extra=$(mktemp)
trap 'rm -f "$extra"' EXIT
python3 - "$extra" <<'EOF'
import sys
import tomllib

with open("pyproject.toml", "rb") as f:
    requires = tomllib.load(f)["build-system"]["requires"]
with open(sys.argv[1], "w") as out:
    out.write("\n".join([*requires, "pip"]) + "\n")
EOF
common=(--universal --python-version "$python_version" --generate-hashes --custom-compile-command "make lock"
        --quiet)
"$uv" pip compile "${common[@]}" pyproject.toml "$extra" --extra dev --output-file requirements/dev.lock
"$uv" pip compile "${common[@]}" pyproject.toml "$extra" --constraints requirements/dev.lock \
  --output-file requirements/run.lock
# The temporary file's name is not part of the lock: name the build requirements for what they are.
sed -i "s|-r $extra|pyproject.toml (build-system), pip|" requirements/dev.lock requirements/run.lock
echo "lock.sh: wrote requirements/dev.lock ($(grep -c '^[a-z]' requirements/dev.lock) packages) and" \
  "requirements/run.lock ($(grep -c '^[a-z]' requirements/run.lock) packages)"
