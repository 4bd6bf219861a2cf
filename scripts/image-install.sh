#!/usr/bin/env bash
# The image's install steps, run by the Dockerfile's build stage and by tests/cluster/test_cluster_image_install.py
# (which runs the Dockerfile's own RUN lines with its paths moved under a temporary directory).
#
#   image-install.sh venv LOCK VENV       create the virtualenv VENV with the locked runtime dependencies
#                                         (requirements/run.lock: hashes checked, nothing resolved)
#   image-install.sh wheel SRC DIST VENV  build koordpy's wheel from the source tree SRC into DIST with
#                                         VENV's locked setuptools (no build isolation: nothing unlocked)
#   image-install.sh install DIST VENV    install that wheel into VENV (no dependencies: the lock's are
#                                         there), then remove the build tools and pip
#
# $PYTHON picks the interpreter (default python3). Byte code is compiled at install time, so a
# container with a read-only root file system never needs to write any.
set -euo pipefail
python=${PYTHON:-python3}
step=${1:?usage: image-install.sh venv LOCK VENV | wheel SRC DIST VENV | install DIST VENV}
pip() { "$1/bin/python" -m pip --disable-pip-version-check "${@:2}"; }
case "$step" in
  venv)
    lock=${2:?LOCK}
    venv=${3:?VENV}
    "$python" -m venv "$venv"
    echo "image-install.sh: installing the locked versions of $(basename "$lock") (sha256 $(sha256sum "$lock" | cut -c1-12))"
    pip "$venv" install --require-hashes --no-deps --only-binary :all: --compile -r "$lock"
    ;;
  wheel)
    src=${2:?SRC}
    dist=${3:?DIST}
    venv=${4:?VENV}
    pip "$venv" wheel --no-deps --no-build-isolation --wheel-dir "$dist" "$src"
    ;;
  install)
    dist=${2:?DIST}
    venv=${3:?VENV}
    wheels=("$dist"/koordpy-*.whl)
    if [ "${#wheels[@]}" -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
      echo "image-install.sh: expected exactly one koordpy wheel in $dist" >&2
      exit 1
    fi
    pip "$venv" install --no-deps --compile "${wheels[0]}"
    # setuptools, wheel and pip are not needed at run time.
    pip "$venv" uninstall --yes setuptools wheel pip >/dev/null
    ;;
  *)
    echo "image-install.sh: unknown step $step (expected venv, wheel or install)" >&2
    exit 2
    ;;
esac
