#!/usr/bin/env bash
# Builds cyclonedx-gomod, the CycloneDX project's SBOM generator for Go, from its Go
# module and caches it in a versioned folder beside the other tools
# (hack/control-plane.sh), so only the first run pays. `make image` runs its `bin`
# mode on each image binary: a CycloneDX JSON SBOM of the modules linked into it,
# read from the binary's own build information. Prints the binary's path.
#
#   hack/cyclonedx-gomod.sh            build if missing, print the binary's path
#   hack/cyclonedx-gomod.sh --print    print the binary's path, fail if not built
set -euo pipefail

CYCLONEDX_GOMOD_VERSION="${CYCLONEDX_GOMOD_VERSION:-v1.10.0}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/tools/cyclonedx-gomod-${CYCLONEDX_GOMOD_VERSION}/bin"
TOOL="$BIN_DIR/cyclonedx-gomod"

have() { [[ -x "$TOOL" ]]; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$TOOL" "cyclonedx-gomod ${CYCLONEDX_GOMOD_VERSION} not built; run hack/cyclonedx-gomod.sh" "$@"

# The machine's Go, like the other tools: v1.10.0 asks for go 1.25.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build cyclonedx-gomod

echo "cyclonedx-gomod: building ${CYCLONEDX_GOMOD_VERSION} (first time only; docs/performance.md has the time)" >&2
go install -trimpath -ldflags "-s -w" "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@${CYCLONEDX_GOMOD_VERSION}"

"$GOBIN/cyclonedx-gomod" version >/dev/null 2>&1 || { echo "cyclonedx-gomod: the built binary does not run" >&2; exit 1; }
install_binary "$GOBIN/cyclonedx-gomod" "$TOOL"
echo "cyclonedx-gomod: cached in $BIN_DIR" >&2
echo "$TOOL"
