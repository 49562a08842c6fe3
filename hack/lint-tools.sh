#!/usr/bin/env bash
# Installs the static-check tools hack/lint.sh runs, from the Go module proxy (no
# download sites are reachable here), into a versioned cache folder beside the
# control plane's (hack/control-plane.sh), so only the first run pays (10-20 min on
# 2 cores, mostly downloading and building golangci-lint and the database indexer).
# Idempotent: cached tools are reused.
#
#   golangci-lint  github.com/golangci/golangci-lint/v2/cmd/golangci-lint
#   govulncheck    golang.org/x/vuln/cmd/govulncheck
#   vulndb/        the Go vulnerability database, built offline from the OSV files of
#                  the golang.org/x/vulndb module (vuln.go.dev is not reachable here;
#                  govulncheck reads it with -db file://...). Its date is the pseudo-
#                  version's: `make vulndb-refresh` pins the newest.
#
#   hack/lint-tools.sh                   install what is missing, print the bin folder
#   hack/lint-tools.sh --print           print the bin folder, fail if not installed
#   hack/lint-tools.sh --vulndb-version  print the pinned golang.org/x/vulndb version
#
# The database's age is printed, and checked against VULNDB_MAX_AGE_DAYS, by
# hack/vulndb-age.sh (a step of hack/lint.sh); `make vulndb-refresh` pins the newest.
#
# The vulnerability database is "$(dirname "$(hack/lint-tools.sh)")/vulndb".
set -euo pipefail

GOLANGCI_LINT_VERSION="${GOLANGCI_LINT_VERSION:-v2.15.0}"
GOVULNCHECK_VERSION="${GOVULNCHECK_VERSION:-v1.9.0}"
VULNDB_VERSION="${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
# golangci-lint type-checks the code with the Go it was built with: it is built
# (and cached) with the machine's own Go. govulncheck judges the standard library
# of the Go it runs under, so it is built with the release toolchain, the Go the
# binary ships with (VULN_GOTOOLCHAIN, as the Makefile's GOTOOLCHAIN).
export GOTOOLCHAIN=local
VULN_GOTOOLCHAIN="${VULN_GOTOOLCHAIN:-go1.27.3}"
GO_VERSION="$(go env GOVERSION)"
ROOT="$CACHE_ROOT/tools/lint_golangci-lint-${GOLANGCI_LINT_VERSION}_govulncheck-${GOVULNCHECK_VERSION}_vulndb-${VULNDB_VERSION##*-}_${GO_VERSION}"
BIN_DIR="$ROOT/bin"
DB_DIR="$ROOT/vulndb"

# Capture before matching: with pipefail, grep -q closing the pipe early would make
# the check fail at random.
have_lint() { [[ -x "$BIN_DIR/golangci-lint" ]] && [[ "$("$BIN_DIR/golangci-lint" version 2>/dev/null)" == *"version ${GOLANGCI_LINT_VERSION#v} "* ]]; }
VULNCHECK="govulncheck-${VULN_GOTOOLCHAIN}"
have_vuln() { [[ -x "$BIN_DIR/$VULNCHECK" ]] && [[ "$("$BIN_DIR/$VULNCHECK" -version 2>/dev/null)" == *"govulncheck@${GOVULNCHECK_VERSION}"* ]]; }
have_db() { [[ -s "$DB_DIR/index/db.json" && -s "$DB_DIR/index/modules.json" ]]; }
have_all() { have_lint && have_vuln && have_db; }

if [[ "${1:-}" == "--vulndb-version" ]]; then echo "$VULNDB_VERSION"; exit 0; fi
source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have_all "$BIN_DIR" "lint tools not installed; run hack/lint-tools.sh" "$@"

export GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build lint-tools
mkdir -p "$BIN_DIR"
log() { echo "lint-tools: $*" >&2; }

# Install atomically, so a concurrent or interrupted run never leaves half a binary.
place() { cp "$GOBIN/$1" "$BIN_DIR/$1.tmp.$$" && mv -f "$BIN_DIR/$1.tmp.$$" "$BIN_DIR/$1"; }

if ! have_lint; then
  log "building golangci-lint ${GOLANGCI_LINT_VERSION} (first time only, ~3 min)"
  # golangci-lint reads its version from the module's build info.
  go install -trimpath -ldflags "-s -w" "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@${GOLANGCI_LINT_VERSION}"
  place golangci-lint
  have_lint || { log "installed golangci-lint does not report ${GOLANGCI_LINT_VERSION}: $("$BIN_DIR/golangci-lint" version 2>&1)"; exit 1; }
fi

if ! have_vuln; then
  log "building govulncheck ${GOVULNCHECK_VERSION} with ${VULN_GOTOOLCHAIN}"
  GOTOOLCHAIN="$VULN_GOTOOLCHAIN" go install -trimpath -ldflags "-s -w" "golang.org/x/vuln/cmd/govulncheck@${GOVULNCHECK_VERSION}"
  cp "$GOBIN/govulncheck" "$BIN_DIR/$VULNCHECK.tmp.$$" && mv -f "$BIN_DIR/$VULNCHECK.tmp.$$" "$BIN_DIR/$VULNCHECK"
  have_vuln || { log "installed govulncheck does not report ${GOVULNCHECK_VERSION}: $("$BIN_DIR/$VULNCHECK" -version 2>&1)"; exit 1; }
fi

if ! have_db; then
  log "building the vulnerability database from golang.org/x/vulndb@${VULNDB_VERSION}"
  src="$(go mod download -json "golang.org/x/vulndb@${VULNDB_VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')"
  [[ -d "$src/data/osv" ]] || { log "golang.org/x/vulndb@${VULNDB_VERSION} has no data/osv folder"; exit 1; }
  go install -trimpath "golang.org/x/vulndb/cmd/indexdb@${VULNDB_VERSION}"
  rm -rf "$DB_DIR.tmp"
  "$GOBIN/indexdb" -vulns "$src/data/osv" -out "$DB_DIR.tmp"
  rm -rf "$DB_DIR"; mv "$DB_DIR.tmp" "$DB_DIR"
  have_db || { log "the vulnerability database in $DB_DIR is incomplete"; exit 1; }
fi

log "cached in $ROOT"
echo "$BIN_DIR"
