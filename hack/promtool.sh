#!/usr/bin/env bash
# Installs promtool, the Prometheus rules checker and unit-test runner, from the Go
# module proxy (no download sites are reachable here) into a versioned cache folder
# beside helm's (hack/tools.sh), so only the first run pays. The chart tests run the
# PrometheusRule's unit tests with it (`promtool test rules`). Prints the binary's path.
#
#   hack/promtool.sh            install promtool if missing, print its path
#   hack/promtool.sh --print    print promtool's path, fail if not installed
#
# Prometheus 3.x is published to the module proxy as v0.3xx.y (3.16.0 is v0.316.0).
set -euo pipefail

PROMETHEUS_MODULE_VERSION="${PROMETHEUS_MODULE_VERSION:-v0.316.0}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/tools/promtool-${PROMETHEUS_MODULE_VERSION}/bin"
PROMTOOL="$BIN_DIR/promtool"
# v0.316.0 -> 3.16.0, the version promtool reports.
minor="${PROMETHEUS_MODULE_VERSION#v0.3}"; minor="${minor%%.*}"; minor="$((10#$minor))"
patch="${PROMETHEUS_MODULE_VERSION##*.}"
RELEASE="3.${minor}.${patch}"

have() { [[ -x "$PROMTOOL" ]] && "$PROMTOOL" --version 2>/dev/null | grep -q "version ${RELEASE} "; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$PROMTOOL" "promtool ${RELEASE} (${PROMETHEUS_MODULE_VERSION}) not installed; run hack/promtool.sh" "$@"

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build promtool

echo "promtool: installing promtool ${RELEASE} with go install (first time only: ~9 CPU-minutes, ~5 min on 2 idle cores)" >&2
# The prometheus module has no replace or exclude directives, so `go install pkg@version`
# builds it exactly as its go.mod pins it. The version package is set as the release does.
v=github.com/prometheus/common/version
go install -trimpath \
  -ldflags "-s -w -X ${v}.Version=${RELEASE} -X ${v}.Branch=HEAD -X ${v}.Revision=${PROMETHEUS_MODULE_VERSION}" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}"

install_binary "$GOBIN/promtool" "$PROMTOOL"
have || { echo "promtool: installed binary does not report ${RELEASE}: $("$PROMTOOL" --version 2>&1 | head -1)" >&2; exit 1; }
echo "promtool: cached in $BIN_DIR" >&2
echo "$PROMTOOL"
