#!/usr/bin/env bash
# Fetches the Prometheus Operator's CustomResourceDefinitions the chart renders objects
# of (PodMonitor, PrometheusRule) from its Go module on the module proxy
# (its zip carries example/prometheus-operator-crd/*.yaml, the same files the operator's
# release bundles) and caches them in a versioned folder beside helm's. The chart tests
# install them into the test API server. Prints the folder.
#
#   hack/prometheus-operator-crds.sh            fetch if missing, print the folder
#   hack/prometheus-operator-crds.sh --print    print the folder, fail if not fetched
set -euo pipefail

PROMETHEUS_OPERATOR_VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
DIR="$CACHE_ROOT/tools/prometheus-operator-crds-${PROMETHEUS_OPERATOR_VERSION}"
CRDS=(podmonitors prometheusrules)

have() {
  local c
  for c in "${CRDS[@]}"; do [[ -s "$DIR/monitoring.coreos.com_${c}.yaml" ]] || return 1; done
}

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$DIR" "Prometheus Operator CRDs ${PROMETHEUS_OPERATOR_VERSION} not fetched; run hack/prometheus-operator-crds.sh" "$@"

export GOTOOLCHAIN=local GOWORK=off GOFLAGS=-mod=mod
echo "prometheus-operator-crds: fetching github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION} from the module proxy" >&2
# Outside any module: `go mod download` only fills the module cache (checksums verified
# against the checksum database) and says where the module's files are.
json="$(cd "${TMPDIR:-/tmp}" && go mod download -json "github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION}")"
src="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p' <<<"$json")"
[[ -n "$src" && -d "$src/example/prometheus-operator-crd" ]] || { echo "prometheus-operator-crds: no example/prometheus-operator-crd in the module: $json" >&2; exit 1; }

tmp="$(mktemp -d "$CACHE_ROOT/tools/.crds.XXXXXX" 2>/dev/null || { mkdir -p "$CACHE_ROOT/tools"; mktemp -d "$CACHE_ROOT/tools/.crds.XXXXXX"; })"
trap 'rm -rf "$tmp"' EXIT
for c in "${CRDS[@]}"; do
  cp "$src/example/prometheus-operator-crd/monitoring.coreos.com_${c}.yaml" "$tmp/"
done
chmod -R u+w "$tmp"
echo "github.com/prometheus-operator/prometheus-operator@${PROMETHEUS_OPERATOR_VERSION} example/prometheus-operator-crd" >"$tmp/SOURCE"
# Publish atomically: a concurrent or interrupted run never leaves half the files.
rm -rf "$DIR.old"; [[ -d "$DIR" ]] && mv "$DIR" "$DIR.old"
mv "$tmp" "$DIR" && rm -rf "$DIR.old"
have || { echo "prometheus-operator-crds: missing files in $DIR" >&2; exit 1; }
echo "prometheus-operator-crds: cached in $DIR" >&2
echo "$DIR"
