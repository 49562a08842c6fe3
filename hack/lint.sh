#!/usr/bin/env bash
# Static checks, as `make lint` and CI run them: gofmt, go vet, golangci-lint (with
# .golangci.yml), actionlint over .github/workflows (hack/actionlint.sh), the release binary's Go (hack/check-release-go.sh on bin/watchdog,
# which `make lint` builds first), the vulnerability database's age
# (hack/vulndb-age.sh: at most VULNDB_MAX_AGE_DAYS, default 90) and govulncheck
# (against the offline vulnerability database that hack/lint-tools.sh builds). Every
# step runs; the script fails if any step failed.
# The first run installs the tools (10-20 min, hack/lint-tools.sh); later runs take
# 2-4 minutes on 2 cores.
#
#   hack/lint.sh                       all steps
#   LINT_STRICT_STDLIB=0 hack/lint.sh  standard-library vulnerabilities only warn
#
# gofmt and golangci-lint run with the machine's Go (golangci-lint is built
# with it); vet and govulncheck run with the release toolchain (VULN_GOTOOLCHAIN, the
# Makefile's GOTOOLCHAIN): the standard library that ships in the binary.
set -euo pipefail
cd "$(dirname "$0")/.."
export VULN_GOTOOLCHAIN="${VULN_GOTOOLCHAIN:-go1.27.3}"
export GOTOOLCHAIN=local GOWORK=off

BIN="$(hack/lint-tools.sh)"
VULNDB="$(dirname "$BIN")/vulndb"

failed=()
step() { echo "lint: $*" >&2; }

step "gofmt -l"
mapfile -t gofiles < <(git ls-files --cached --others --exclude-standard -- '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*')
unformatted="$(gofmt -l "${gofiles[@]}")"
if [[ -n "$unformatted" ]]; then
  echo "gofmt needed:" >&2; echo "$unformatted" >&2
  failed+=(gofmt)
fi

# vet with the release toolchain, as `make vet` does: after `make test` (CI) its
# results come from the build cache instead of a second compile with another Go.
step "go vet -tags release ./... (${VULN_GOTOOLCHAIN})"
GOTOOLCHAIN="$VULN_GOTOOLCHAIN" go vet -tags release ./... || failed+=("go vet")

step "golangci-lint $("$BIN/golangci-lint" version --short 2>/dev/null || true) run ./..."
"$BIN/golangci-lint" run --build-tags release ./... || failed+=(golangci-lint)

step "actionlint $("$(hack/actionlint.sh)" -version 2>/dev/null | head -1) .github/workflows"
# shellcheck and pyflakes are not Go modules: actionlint runs without them (it checks
# the workflows' syntax, expressions, action inputs and job graph).
"$(hack/actionlint.sh)" -shellcheck= -pyflakes= .github/workflows/*.yml || failed+=(actionlint)

step "release binary built with $VULN_GOTOOLCHAIN (${WATCHDOG_BIN:-bin/watchdog}, make build)"
hack/check-release-go.sh "${WATCHDOG_BIN:-bin/watchdog}" "$VULN_GOTOOLCHAIN" || failed+=("release binary's Go")

step "vulnerability database age"
hack/vulndb-age.sh || failed+=("vulnerability database age")

step "govulncheck ./... ($VULN_GOTOOLCHAIN, database: $VULNDB)"
# Exit 3 means reachable vulnerabilities. Those in a module of go.mod fail the check
# (go get the fixed version). Those in the standard library are the toolchain's:
# they fail only with LINT_STRICT_STDLIB=1, since the fix is a newer Go for every
# machine, build script and the Dockerfile's image, a project-wide switch
# (GOTOOLCHAIN), not a change to the code.
vout="$(mktemp)"; trap 'rm -f "$vout"' EXIT
set +e; GOTOOLCHAIN="$VULN_GOTOOLCHAIN" "$BIN/govulncheck-$VULN_GOTOOLCHAIN" -db "file://$VULNDB" ./... >"$vout" 2>&1; vrc=$?; set -e
cat "$vout"
if ((vrc == 3)); then
  in_modules="$(grep -c '^  Module: ' "$vout" || true)"
  in_stdlib="$(grep -c '^  Standard library$' "$vout" || true)"
  if ((in_modules > 0)); then
    failed+=("govulncheck ($in_modules reachable in required modules)")
  elif [[ "${LINT_STRICT_STDLIB:-1}" == 1 ]]; then
    failed+=("govulncheck ($in_stdlib reachable in the standard library of $VULN_GOTOOLCHAIN)")
  else
    step "WARNING: $in_stdlib reachable vulnerabilities in the standard library of $VULN_GOTOOLCHAIN: build with the Go named under 'Fixed in'"
  fi
elif ((vrc != 0)); then
  failed+=(govulncheck)
fi

if ((${#failed[@]})); then
  step "FAILED: ${failed[*]}"
  exit 1
fi
step "all clean"
