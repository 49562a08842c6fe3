#!/usr/bin/env bash
# The Prometheus Pushgateway, cached in a versioned folder beside Alertmanager's
# (hack/alertmanager.sh), so only the first run pays: on Debian, Debian's build
# (package prometheus-pushgateway, 1.5.1 in bookworm; hack/cache.sh debian_binaries);
# elsewhere, or with WATCHDOG_TOOLS_FROM=module, built from its Go module (no
# download sites are reachable here). The integration tests start it
# on loopback to check `--pushgateway-url` (CronJob mode's metrics) against the real
# push API. Prints the path of the binary; the Makefile passes it to the tests as
# WATCHDOG_PUSHGATEWAY.
#
#   hack/pushgateway.sh            fetch or build if missing, print the binary's path
#   hack/pushgateway.sh --print    print the binary's path, fail if not cached
#
# The module proxy refuses the version list of github.com/prometheus/pushgateway
# but serves exact versions: v1.11.1 is the newest it serves.
set -euo pipefail

PG_VERSION="${PG_VERSION:-v1.11.1}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
PG_DEB_VERSION="${PG_DEB_VERSION:-1.5.1}"
MOD_PG="$CACHE_ROOT/pushgateway-${PG_VERSION}/bin/pushgateway"
DEB_PG="$CACHE_ROOT/pushgateway-debian-${PG_DEB_VERSION}/bin/pushgateway"

reports() { [[ -x "$1" ]] && "$1" --version 2>&1 | grep -q "version $2 "; }
# have: either cached binary (Debian's first unless WATCHDOG_TOOLS_FROM=module); sets PG.
have() {
  PG="$DEB_PG"
  [[ "${WATCHDOG_TOOLS_FROM:-debian}" != module ]] && reports "$DEB_PG" "$PG_DEB_VERSION" && return 0
  PG="$MOD_PG"
  reports "$MOD_PG" "${PG_VERSION#v}"
}

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
have || true
cached_or_exit have "$PG" "pushgateway not cached; run hack/pushgateway.sh" "$@"

if debian_binaries prometheus-pushgateway "$PG_DEB_VERSION" "$(dirname "$DEB_PG")" prometheus-pushgateway:pushgateway && have; then
  echo "$PG"; exit 0
fi

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
  GOFLAGS="${GOFLAGS/-mod=mod/-mod=readonly}" go build -trimpath \
    -ldflags "-s -w -X ${v}.Version=${PG_VERSION#v} -X ${v}.Branch=module-proxy -X ${v}.Revision=${PG_VERSION}" \
    -o "$SCRATCH/pushgateway" .
)

install_binary "$SCRATCH/pushgateway" "$MOD_PG"
reports "$MOD_PG" "${PG_VERSION#v}" || { echo "pushgateway: the built binary does not report ${PG_VERSION}: $("$MOD_PG" --version 2>&1 | head -1)" >&2; exit 1; }
echo "pushgateway: cached in $(dirname "$MOD_PG")" >&2
echo "$MOD_PG"
