#!/usr/bin/env bash
# The Prometheus server and promtool, cached in a versioned folder beside helm's
# (hack/tools.sh): only the first run pays (docs/performance.md has the times).
#   - promtool: the chart tests run the PrometheusRule's unit tests with it, and the
#     backtest tests import synthetic history with `promtool tsdb create-blocks-from
#     openmetrics`;
#   - prometheus: the backtest tests query that history through the real HTTP API.
# On Debian, Debian's build (package prometheus, 2.42.0 in bookworm: seconds, not
# ten CPU-minutes; hack/cache.sh debian_binaries); elsewhere, or with
# WATCHDOG_TOOLS_FROM=module, both built from the Prometheus Go module (no download
# sites are reachable here) in one `go install`, so the two share one compilation,
# with -tags remove_all_sd: neither needs a service-discovery plugin (the server
# only serves imported blocks), and leaving the cloud SDKs out is most of the build.
#
#   hack/prometheus.sh                   fetch or build both if missing, print the server's path
#   hack/prometheus.sh --print           print the server's path, fail if not cached
#   hack/prometheus.sh --print-promtool  print promtool's path, fail if not cached
#
# Prometheus 3.x is published to the module proxy as v0.3xx.y (3.16.0 is v0.316.0).
set -euo pipefail

PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
PROMETHEUS_DEB_VERSION="${PROMETHEUS_DEB_VERSION:-2.42.0}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
MOD_DIR="$CACHE_ROOT/tools/prometheus-${PROMETHEUS_MODULE_VERSION}/bin"
DEB_DIR="$CACHE_ROOT/tools/prometheus-debian-${PROMETHEUS_DEB_VERSION}/bin"
# v0.316.0 -> 3.16.0, the version both binaries report.
minor="${PROMETHEUS_MODULE_VERSION#v0.3}"; minor="${minor%%.*}"; minor="$((10#$minor))"
patch="${PROMETHEUS_MODULE_VERSION##*.}"
RELEASE="3.${minor}.${patch}"

# Debian's reports "version 2.42.0+ds (...)", the module build "version 3.16.0 (...)".
reports() { [[ -x "$1/prometheus" && -x "$1/promtool" ]] && "$1/prometheus" --version 2>/dev/null | grep -q "version $2[ +]" && "$1/promtool" --version 2>/dev/null | grep -q "version $2[ +]"; }
# have: either cached pair (Debian's first unless WATCHDOG_TOOLS_FROM=module); sets BIN_DIR.
have() {
  BIN_DIR="$DEB_DIR"
  [[ "${WATCHDOG_TOOLS_FROM:-debian}" != module ]] && reports "$DEB_DIR" "$PROMETHEUS_DEB_VERSION" && return 0
  BIN_DIR="$MOD_DIR"
  reports "$MOD_DIR" "$RELEASE"
}

want=prometheus
if [[ "${1:-}" == "--print-promtool" ]]; then
  want=promtool
  set -- --print
fi

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
have || true
cached_or_exit have "$BIN_DIR/$want" "prometheus and promtool not cached; run hack/prometheus.sh" "$@"

if debian_binaries prometheus "$PROMETHEUS_DEB_VERSION" "$DEB_DIR" prometheus:prometheus promtool:promtool && have; then
  echo "$BIN_DIR/$want"; exit 0
fi

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

install_binary "$GOBIN/promtool" "$MOD_DIR/promtool"
install_binary "$GOBIN/prometheus" "$MOD_DIR/prometheus"
reports "$MOD_DIR" "$RELEASE" || { echo "prometheus: installed binaries do not report ${RELEASE}: $("$MOD_DIR/prometheus" --version 2>&1 | head -1); $("$MOD_DIR/promtool" --version 2>&1 | head -1)" >&2; exit 1; }
echo "prometheus: cached in $MOD_DIR" >&2
echo "$MOD_DIR/$want"
