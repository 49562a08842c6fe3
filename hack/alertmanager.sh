#!/usr/bin/env bash
# Builds Alertmanager from its Go module (no download sites are reachable here) and
# caches the binary in a versioned folder beside the control plane's
# (hack/control-plane.sh), so only the first run pays. The integration tests start
# it on loopback to check the alertmanager sink against the real v2 API. Prints the
# path of the binary; the Makefile passes it to the tests as WATCHDOG_ALERTMANAGER.
#
#   hack/alertmanager.sh            build if missing, print the binary's path
#   hack/alertmanager.sh --print    print the binary's path, fail if not built
set -euo pipefail

AM_VERSION="${AM_VERSION:-v0.35.0}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/alertmanager-${AM_VERSION}/bin"
AM="$BIN_DIR/alertmanager"

have() { [[ -x "$AM" ]]; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$AM" "alertmanager ${AM_VERSION} not built; run hack/alertmanager.sh" "$@"

# The machine's Go, like the control plane: v0.35.0 asks for go 1.26.0.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build am

echo "alertmanager: building ${AM_VERSION} (first time only, ~4-11 min)" >&2
# The module zip leaves out the web UI's built files, which ui/web.go embeds
# (//go:embed app/dist, then fs.Sub of app/dist/elm and app/dist/mantine): build
# from a writable copy with placeholder pages. The tests use only the API.
modjson="$(cd "$SCRATCH" && go mod download -json "github.com/prometheus/alertmanager@${AM_VERSION}")"
moddir="$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$modjson")"
[[ -d "$moddir" ]] || { echo "alertmanager: module download failed: $modjson" >&2; exit 1; }
SRC="$SCRATCH/src"
cp -R "$moddir" "$SRC"
chmod -R u+w "$SRC"
for ui in elm mantine; do
  mkdir -p "$SRC/ui/app/dist/$ui"
  echo "<!doctype html><title>Alertmanager</title><p>UI not built (watchdog test build).</p>" > "$SRC/ui/app/dist/$ui/index.html"
done

(
  cd "$SRC"
  v="${AM_VERSION#v}"
  go build -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=${v} -X github.com/prometheus/common/version.Branch=module-proxy" \
    -o "$SCRATCH/alertmanager" ./cmd/alertmanager
)

"$SCRATCH/alertmanager" --version >/dev/null 2>&1 || { echo "alertmanager: the built binary does not run" >&2; exit 1; }
install_binary "$SCRATCH/alertmanager" "$AM"
echo "alertmanager: cached in $BIN_DIR" >&2
echo "$AM"
