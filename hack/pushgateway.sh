#!/usr/bin/env bash
# Builds the Prometheus Pushgateway from its Go module (no download sites are
# reachable here) and caches the binary in a versioned folder beside Alertmanager's
# (hack/alertmanager.sh), so only the first run pays. The integration tests start it
# on loopback to check `--pushgateway-url` (CronJob mode's metrics) against the real
# push API. Prints the path of the binary; the Makefile passes it to the tests as
# WATCHDOG_PUSHGATEWAY.
#
#   hack/pushgateway.sh            build if missing, print the binary's path
#   hack/pushgateway.sh --print    print the binary's path, fail if not built
#
# The module proxy refuses the version list of github.com/prometheus/pushgateway
# but serves exact versions: v1.11.1 is the newest it serves.
set -euo pipefail

PG_VERSION="${PG_VERSION:-v1.11.1}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/pushgateway-${PG_VERSION}/bin"
PG="$BIN_DIR/pushgateway"

have() { [[ -x "$PG" ]] && "$PG" --version 2>&1 | grep -q "version ${PG_VERSION#v} "; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$PG" "pushgateway ${PG_VERSION} not built; run hack/pushgateway.sh" "$@"

# The machine's Go, like Alertmanager: the module asks for go 1.23.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build pushgateway

echo "pushgateway: building ${PG_VERSION} (first time only; docs/performance.md has the time)" >&2
# `go install pkg@version` would ask the proxy for the version list (to check for a
# deprecation), which it refuses: download the exact version and build it in place.
# The module has no replace directives and ships its web assets generated
# (asset/assets_vfsdata.go), so its go.mod and go.sum pin the whole build.
modjson="$(cd "$SCRATCH" && go mod download -json "github.com/prometheus/pushgateway@${PG_VERSION}")"
moddir="$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$modjson")"
[[ -d "$moddir" ]] || { echo "pushgateway: module download failed: $modjson" >&2; exit 1; }
v=github.com/prometheus/common/version
(
  cd "$moddir"
  GOFLAGS=-mod=readonly go build -trimpath \
    -ldflags "-s -w -X ${v}.Version=${PG_VERSION#v} -X ${v}.Branch=module-proxy -X ${v}.Revision=${PG_VERSION}" \
    -o "$SCRATCH/pushgateway" .
)

install_binary "$SCRATCH/pushgateway" "$PG"
have || { echo "pushgateway: the built binary does not report ${PG_VERSION}: $("$PG" --version 2>&1 | head -1)" >&2; exit 1; }
echo "pushgateway: cached in $BIN_DIR" >&2
echo "$PG"
