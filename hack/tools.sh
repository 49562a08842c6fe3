#!/usr/bin/env bash
# Installs the tools the chart tests need, from the Go module proxy (no download
# sites are reachable here), into a versioned cache folder beside the control
# plane's (hack/control-plane.sh), so only the first run pays (~2 min for helm).
# Prints the path of the helm binary. Idempotent: a cached binary is reused.
#
#   hack/tools.sh            install helm if missing, print its path
#   hack/tools.sh --print    print helm's path, fail if not installed
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/tools/helm-${HELM_VERSION}/bin"
HELM="$BIN_DIR/helm"

have() { [[ -x "$HELM" ]] && "$HELM" version --short 2>/dev/null | grep -q "^${HELM_VERSION}"; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$HELM" "helm ${HELM_VERSION} not installed; run hack/tools.sh" "$@"

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build tools

echo "tools: installing helm ${HELM_VERSION} with go install (first time only, ~2 min)" >&2
# helm's version package reads its version from the module's build info when the
# ldflags do not set it; set it anyway so `helm version` is exact.
go install -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}" \
  "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"

install_binary "$GOBIN/helm" "$HELM"
have || { echo "tools: installed helm does not report ${HELM_VERSION}: $("$HELM" version --short 2>&1)" >&2; exit 1; }
echo "tools: cached in $BIN_DIR" >&2
echo "$HELM"
