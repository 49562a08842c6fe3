#!/usr/bin/env bash
# Builds actionlint, the linter of GitHub Actions workflows, from its Go module and
# caches it in a versioned folder beside the other tools (hack/control-plane.sh), so
# only the first run pays. `make lint` runs it over .github/workflows (hack/lint.sh).
# Prints the binary's path.
#
#   hack/actionlint.sh            build if missing, print the binary's path
#   hack/actionlint.sh --print    print the binary's path, fail if not built
set -euo pipefail

ACTIONLINT_VERSION="${ACTIONLINT_VERSION:-v1.7.12}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/tools/actionlint-${ACTIONLINT_VERSION}/bin"
TOOL="$BIN_DIR/actionlint"

have() { [[ -x "$TOOL" ]] && "$TOOL" -version 2>/dev/null | grep -q "^${ACTIONLINT_VERSION#v}"; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have "$TOOL" "actionlint ${ACTIONLINT_VERSION} not built; run hack/actionlint.sh" "$@"

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build actionlint

echo "actionlint: building ${ACTIONLINT_VERSION} (first time only; docs/performance.md has the time)" >&2
# actionlint reads its version from the ldflags, else from the module's build info.
go install -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=${ACTIONLINT_VERSION#v}" \
  "github.com/rhysd/actionlint/cmd/actionlint@${ACTIONLINT_VERSION}"

install_binary "$GOBIN/actionlint" "$TOOL"
have || { echo "actionlint: installed binary does not report ${ACTIONLINT_VERSION}: $("$TOOL" -version 2>&1 | head -1)" >&2; exit 1; }
echo "actionlint: cached in $BIN_DIR" >&2
echo "$TOOL"
