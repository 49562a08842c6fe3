#!/usr/bin/env bash
# Builds the Prometheus server and promtool from the Prometheus Go module (no
# download sites are reachable here) in one `go install`, so the two share one
# compilation, and caches both in a versioned folder beside helm's (hack/tools.sh):
# only the first run pays (docs/performance.md has the measured build times).
#   - promtool: the chart tests run the PrometheusRule's unit tests with it, and the
#     backtest tests import synthetic history with `promtool tsdb create-blocks-from
#     openmetrics`;
#   - prometheus: the backtest tests query that history through the real HTTP API.
# Built with -tags remove_all_sd: neither needs a service-discovery plugin (the
# server only serves imported blocks), and leaving the cloud SDKs out is most of
# the build.
#
#   hack/prometheus.sh                   build both if missing, print the server's path
#   hack/prometheus.sh --print           print the server's path, fail if not built
#   hack/prometheus.sh --print-promtool  print promtool's path, fail if not built
#
# Prometheus 3.x is published to the module proxy as v0.3xx.y (3.16.0 is v0.316.0).
set -euo pipefail

PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/tools/prometheus-${PROMETHEUS_MODULE_VERSION}/bin"
PROMETHEUS="$BIN_DIR/prometheus"
PROMTOOL="$BIN_DIR/promtool"
# v0.316.0 -> 3.16.0, the version both binaries report.
minor="${PROMETHEUS_MODULE_VERSION#v0.3}"; minor="${minor%%.*}"; minor="$((10#$minor))"
patch="${PROMETHEUS_MODULE_VERSION##*.}"
RELEASE="3.${minor}.${patch}"

reports() { [[ -x "$1" ]] && "$1" --version 2>/dev/null | grep -q "version ${RELEASE} "; }
have() { reports "$PROMETHEUS" && reports "$PROMTOOL"; }

want="$PROMETHEUS"
if [[ "${1:-}" == "--print-promtool" ]]; then
  want="$PROMTOOL"
  set -- --print
fi

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$want" "prometheus and promtool ${RELEASE} (${PROMETHEUS_MODULE_VERSION}) not built; run hack/prometheus.sh" "$@"

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build prometheus

echo "prometheus: building prometheus and promtool ${RELEASE} in one go install (first time only; docs/performance.md)" >&2
# The prometheus module has no replace or exclude directives, so `go install pkg@version`
# builds it exactly as its go.mod pins it. The web UI is not embedded (no
# builtinassets tag): the tests use only the HTTP API. The version package is set
# as the release does.
v=github.com/prometheus/common/version
go install -trimpath -tags remove_all_sd \
  -ldflags "-s -w -X ${v}.Version=${RELEASE} -X ${v}.Branch=HEAD -X ${v}.Revision=${PROMETHEUS_MODULE_VERSION}" \
  "github.com/prometheus/prometheus/cmd/prometheus@${PROMETHEUS_MODULE_VERSION}" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}"

install_binary "$GOBIN/promtool" "$PROMTOOL"
install_binary "$GOBIN/prometheus" "$PROMETHEUS"
have || { echo "prometheus: installed binaries do not report ${RELEASE}: $("$PROMETHEUS" --version 2>&1 | head -1); $("$PROMTOOL" --version 2>&1 | head -1)" >&2; exit 1; }
echo "prometheus: cached in $BIN_DIR" >&2
echo "$want"
