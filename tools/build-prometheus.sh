#!/usr/bin/env bash
# Builds the monitoring binaries from the pinned Go module in tools/prometheus, once per machine, in one
# `go build` (what they share is compiled once):
#   prometheus       the Prometheus server (github.com/prometheus/prometheus/cmd/prometheus) the real-cluster
#                    tier runs: it scrapes the components and evaluates the chart's alerts
#   promtool         Prometheus' own rule checker and rule unit tester (cmd/promtool)
#   monitoringcheck  decodes ServiceMonitors and PrometheusRules into the Prometheus Operator's API types
#                    (github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring), unknown
#                    fields refused
#
# Both Prometheus commands are built with Prometheus' remove_all_sd build tag: no service discovery plugin
# but the two every build keeps (file_sd and http_sd, its plugins/minimum.go); static_configs is part of the
# configuration itself. The tier gives Prometheus its targets in file_sd files; rule checks and rule unit
# tests need no discovery at all. The plugins left out are most of Prometheus' build.
#
# Output: the directory holding them, on stdout (everything else goes to stderr). The directory is keyed by
# the Prometheus version and a hash of this script and the module's files, under
# ${KOORDPY_CACHE:-~/.cache/koordpy}, apart from tools/build.sh's Kubernetes directory; a directory with a
# complete stamp is reused without building. Go's build and module caches are the ones tools/build.sh and
# tools/build-kubelet.sh use (where `go env` puts them), with the same build environment, so a package all
# of them compile at the same version is compiled once.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
module="$here/prometheus"
version=$(sed -n "s/^[[:space:]]*github.com\/prometheus\/prometheus \(v[0-9.]*\)$/\1/p" "$module/go.mod" | head -n 1)
if [ -z "$version" ]; then
  echo "tools/build-prometheus.sh: no 'github.com/prometheus/prometheus vX.Y.Z' line in $module/go.mod" >&2
  exit 1
fi
if ! command -v go >/dev/null 2>&1; then
  echo "tools/build-prometheus.sh: Prometheus and promtool are built with Go >= 1.26 (go not found on PATH)" >&2
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
# tools/build.sh's environment: GOEXPERIMENT is part of every package's build-cache key.
export GOEXPERIMENT=nojsonv2
export GOFLAGS="-mod=readonly -buildvcs=false"
export CGO_ENABLED=0

start=$(date +%s)
echo "tools/build-prometheus.sh: building prometheus, promtool and monitoringcheck ($version) into $out" >&2
rm -rf "$out/.build"
mkdir -p "$out/.build"
# The version Prometheus reports (--version, prometheus_build_info) is the pinned module's.
(cd "$module" && go build -trimpath -tags remove_all_sd \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$version" -o "$out/.build/" \
  github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool ./monitoringcheck)
for name in prometheus promtool monitoringcheck; do
  mv "$out/.build/$name" "$out/$name"
done
rmdir "$out/.build"
echo "tools/build-prometheus.sh: built in $(($(date +%s) - start)) s" >&2
"$out/prometheus" --version >&2
echo "$version" > "$out/VERSION"
touch "$stamp"
echo "$out"
