#!/usr/bin/env bash
# Builds the kubelet the guest tier runs (tests/guest: a real kubelet beside the agent in a QEMU guest)
# from the pinned Go module in tools/kubelet (the same Kubernetes version as tools/kubernetes), once per
# machine.
#
# Output: the directory holding the kubelet, on stdout (everything else goes to stderr). It is keyed by
# the Kubernetes version and a hash of this script and tools/kubelet's module files, under
# ${KOORDPY_CACHE:-~/.cache/koordpy}/kubelet-<version>-<hash>: a directory of its own, so building it
# never touches the control plane's binaries of tools/build.sh. A directory with a complete stamp is reused.
# Go's build cache is tools/build.sh's (where `go env` puts it), used with the same build environment: the
# packages the kubelet shares with the control plane (client-go, apimachinery, apiserver, component-base and
# most of k8s.io/kubernetes/pkg at the same version) are compiled once, by whichever build runs first.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
k8s_version=$(sed -n "s/^[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p" "$here/kubelet/go.mod" | head -n 1)
[ -n "$k8s_version" ] || { echo "tools/build-kubelet.sh: no k8s.io/kubernetes version in tools/kubelet/go.mod" >&2; exit 1; }
command -v go >/dev/null 2>&1 || { echo "tools/build-kubelet.sh: Go >= 1.26 is needed (go not found on PATH)" >&2; exit 1; }

key=$(cat "$here/build-kubelet.sh" "$here/kubelet/go.mod" "$here/kubelet/go.sum" "$here/kubelet/tools.go" \
      | sha256sum | cut -c1-12)
out="${KOORDPY_CACHE:-$HOME/.cache/koordpy}/kubelet-$k8s_version-$key"
if [ -f "$out/.complete" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"

# tools/build.sh's environment: GOEXPERIMENT is part of every package's build-cache key (on a Go whose
# default differs, the kubelet would otherwise recompile everything the control plane's build compiled).
export GOEXPERIMENT=nojsonv2
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0
minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
start=$(date +%s)
echo "tools/build-kubelet.sh: building kubelet $k8s_version into $out" >&2
(cd "$here/kubelet" && go build -trimpath -ldflags "$ldflags" -o "$out/kubelet.tmp" k8s.io/kubernetes/cmd/kubelet)
mv "$out/kubelet.tmp" "$out/kubelet"
echo "$k8s_version" > "$out/VERSION"
echo "tools/build-kubelet.sh: kubelet built in $(( $(date +%s) - start )) s" >&2
touch "$out/.complete"
echo "$out"
