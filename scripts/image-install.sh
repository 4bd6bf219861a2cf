#!/usr/bin/env bash
# The image's install steps, run by the Dockerfile's build stage and by tests/cluster/test_cluster_image_install.py
# (which runs the Dockerfile's own RUN lines with its paths moved under a temporary directory).
#
#   image-install.sh wheel SRC DIST   build koordpy's wheel from the source tree SRC into DIST
#   image-install.sh venv DIST VENV   create the virtualenv VENV and install that wheel with its
#                                     runtime dependencies (never the dev extras)
#
# $PYTHON picks the interpreter (default python3). Byte code is compiled at install time, so a
# container with a read-only root file system never needs to write any.
set -euo pipefail
python=${PYTHON:-python3}
step=${1:?usage: image-install.sh wheel SRC DIST | venv DIST VENV}
case "$step" in
  wheel)
    src=${2:?SRC}
    dist=${3:?DIST}
    "$python" -m pip wheel --no-deps --disable-pip-version-check --wheel-dir "$dist" "$src"
    ;;
  venv)
    dist=${2:?DIST}
    venv=${3:?VENV}
    wheels=("$dist"/koordpy-*.whl)
    if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
      echo "image-install.sh: expected exactly one koordpy wheel in $dist" >&2
      exit 1
    fi
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --disable-pip-version-check --compile "${wheels[0]}"
    # pip and setuptools are not needed at run time.
    "$venv/bin/python" -m pip uninstall --disable-pip-version-check --yes pip >/dev/null
    ;;
  *)
    echo "image-install.sh: unknown step $step (expected wheel or venv)" >&2
    exit 2
    ;;
esac
