#!/usr/bin/env bash
# Builds the monitoring tests' binaries from the pinned Go module in tools/prometheus, once per machine:
#   promtool         Prometheus' own rule checker and rule unit tester (github.com/prometheus/prometheus)
#   monitoringcheck  decodes ServiceMonitors and PrometheusRules into the Prometheus Operator's API types
#                    (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring), unknown
#                    fields refused
#
# Output: the directory holding them, on stdout (everything else goes to stderr). The directory is keyed by
# the Prometheus version and a hash of this script and the module's files, under
# ${KOORDPY_CACHE:-~/.cache/koordpy}, apart from tools/build.sh's Kubernetes directory; a directory with a
# complete stamp is reused without building.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module="$here/prometheus"
version=$(sed -n "s/^[[:space:]]*github.com\/prometheus\/prometheus \(v[0-9.]*\)$/\1/p" "$module/go.mod" | head -n 1)
if [ -z "$version" ]; then
  echo "tools/build-prometheus.sh: no 'github.com/prometheus/prometheus vX.Y.Z' line in $module/go.mod" >&2
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "tools/build-prometheus.sh: promtool is built with Go >= 1.26 (go not found on PATH)" >&2
  exit 1
fi

key=$(cat "$here/build-prometheus.sh" "$module/go.mod" "$module/go.sum" "$module/tools.go" \
      "$module/monitoringcheck/main.go" | sha256sum | cut -c1-12)
out="${KOORDPY_CACHE:-$HOME/.cache/koordpy}/prometheus-$version-$key"
stamp="$out/.complete"
if [ -f "$stamp" ]; then
  echo "$out"
  exit 0
fi
mkdir -p "$out"
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0

build() {  # output name, package, build tags
  local start
  start=$(date +%s)
  echo "tools/build-prometheus.sh: building $1 ($2) into $out" >&2
  (cd "$module" && go build -trimpath -tags "${3:-}" -ldflags "-s -w" -o "$out/$1.tmp" "$2")
  mv "$out/$1.tmp" "$out/$1"
  echo "tools/build-prometheus.sh: $1 built in $(($(date +%s) - start)) s" >&2
}

# Without Prometheus' service discovery plugins (its remove_all_sd build tag): rule checks and rule unit
# tests need none of them, and they are most of its build.
build promtool github.com/prometheus/prometheus/cmd/promtool remove_all_sd
build monitoringcheck ./monitoringcheck
"$out/promtool" --version >&2
echo "$version" > "$out/VERSION"
touch "$stamp"
echo "$out"
