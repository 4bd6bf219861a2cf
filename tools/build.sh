#!/usr/bin/env bash
# Builds the real-cluster test tier's binaries from the pinned Go modules in tools/kubernetes and
# tools/kwok, once per machine: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,
# etcd (a loopback wrapper around etcd's embed package) and kwok.
#
# Output: the directory holding the binaries, on stdout (everything else goes to stderr).
# The directory is keyed by the Kubernetes version and a hash of the module files, under
# ${KOORDPY_CACHE:-~/.cache/koordpy}; a directory with a complete stamp is reused without building.
# Go's own build and module caches stay where `go env` puts them (outside the work tree).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
k8s_version=$(sed -n "s/^[[:space:]]*k8s.io\/kubernetes \(v[0-9.]*\)$/\1/p" "$here/kubernetes/go.mod" | head -n 1)
if [ -z "$k8s_version" ]; then
  echo "tools/build.sh: no 'require k8s.io/kubernetes vX.Y.Z' line in tools/kubernetes/go.mod" >&2
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "tools/build.sh: the real-cluster tier needs Go >= 1.26 to build Kubernetes $k8s_version (go not found on PATH)" >&2
  exit 1
fi
go_version=$(go env GOVERSION)
case "$go_version" in
  go1.2[6-9]*|go1.[3-9][0-9]*) ;;
  *) echo "tools/build.sh: Kubernetes $k8s_version needs Go >= 1.26, found $go_version" >&2; exit 1 ;;
esac

key=$(cat "$here/build.sh" "$here/kubernetes/go.mod" "$here/kubernetes/go.sum" "$here/kubernetes/etcd/main.go" \
      "$here/kwok/go.mod" "$here/kwok/go.sum" | sha256sum | cut -c1-12)
out="${KOORDPY_CACHE:-$HOME/.cache/koordpy}/k8s-$k8s_version-$key"
stamp="$out/.complete"
if [ -f "$stamp" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"

# Go 1.27 turns on encoding/json v2 by default, which breaks kube-openapi's /openapi/v2 in the
# apiserver (every kubectl apply then fails); the experiment off keeps the v1 behaviour on any Go.
export GOEXPERIMENT=nojsonv2
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0

minor=${k8s_version#v1.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags="$ldflags -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags="$ldflags -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build() {  # module dir, output name, package
  local start end
  start=$(date +%s)
  echo "tools/build.sh: building $2 ($3) into $out" >&2
  (cd "$here/$1" && go build -trimpath -ldflags "$ldflags" -o "$out/$2.tmp" "$3")
  mv "$out/$2.tmp" "$out/$2"
  end=$(date +%s)
  echo "tools/build.sh: $2 built in $((end - start)) s" >&2
}

total_start=$(date +%s)
build kubernetes etcd ./etcd
build kubernetes kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubernetes kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kubernetes kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
build kubernetes kubectl k8s.io/kubernetes/cmd/kubectl
build kwok kwok sigs.k8s.io/kwok/cmd/kwok
# kwok ships its stages (what it does to a fake node or pod, and when) as data files in its module, not
# in the binary: the same "fast" set kwokctl uses (nodes Ready at once, heartbeats through leases, pods
# Running at once, deleted pods removed), copied beside the binary.
kwok_dir=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
{
  for stage in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
               pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    echo "---"
    cat "$kwok_dir/kustomize/stage/$stage"
  done
} > "$out/kwok-stages.yaml"
echo "$k8s_version" > "$out/VERSION"
echo "tools/build.sh: all binaries built in $(( $(date +%s) - total_start )) s" >&2
touch "$stamp"
echo "$out"
