#!/usr/bin/env bash
# Builds ko (the Go image builder: multi-arch images without a Docker daemon, an
# SPDX SBOM per image) from its Go module and caches it in a versioned folder
# beside the other tools (hack/control-plane.sh), so only the first run pays.
# hack/image.sh runs it. Prints the binary's path.
#
#   hack/ko.sh            build if missing, print the binary's path
#   hack/ko.sh --print    print the binary's path, fail if not built
set -euo pipefail

KO_VERSION="${KO_VERSION:-v0.19.1}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/tools/ko-${KO_VERSION}/bin"
TOOL="$BIN_DIR/ko"

have() { [[ -x "$TOOL" ]]; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$TOOL" "ko ${KO_VERSION} not built; run hack/ko.sh" "$@"

# The machine's Go, like the other tools.
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build ko

echo "ko: building ${KO_VERSION} (first time only; docs/performance.md has the time)" >&2
go install -trimpath -ldflags "-s -w" "github.com/google/ko@${KO_VERSION}"

[[ "$("$GOBIN/ko" version 2>/dev/null)" == "${KO_VERSION}" ]] || { echo "ko: the built binary does not run or names another version" >&2; exit 1; }
install_binary "$GOBIN/ko" "$TOOL"
echo "ko: cached in $BIN_DIR" >&2
echo "$TOOL"
