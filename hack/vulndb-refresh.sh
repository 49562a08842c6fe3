#!/usr/bin/env bash
# Pins the newest golang.org/x/vulndb the Go module proxy serves as the vulnerability
# database of `make lint` (the default VULNDB_VERSION in hack/lint-tools.sh and the
# version docs/fuzzing.md names), then builds it (hack/lint-tools.sh, a few minutes
# the first time). Commit the result: the pin is what makes the scan reproducible.
#
#   make vulndb-refresh
set -euo pipefail
cd "$(dirname "$0")/.."
old="$(hack/lint-tools.sh --vulndb-version)"
new="$(cd "${TMPDIR:-/tmp}" && GOTOOLCHAIN=local GOFLAGS=-mod=mod go list -m -f '{{.Version}}' golang.org/x/vulndb@latest)"
[[ "$new" =~ ^v0\.0\.0-[0-9]{14}-[0-9a-f]{12}$ ]] || { echo "vulndb-refresh: unexpected version $new" >&2; exit 1; }
if [[ "$new" == "$old" ]]; then
  echo "vulndb-refresh: golang.org/x/vulndb@$old is already the newest the module proxy serves"
else
  sed -i "s/VULNDB_VERSION:-${old}/VULNDB_VERSION:-${new}/" hack/lint-tools.sh
  sed -i "s/${old}/${new}/g; s/vulndb-${old##*-}/vulndb-${new##*-}/g" docs/fuzzing.md
  [[ "$(hack/lint-tools.sh --vulndb-version)" == "$new" ]] || { echo "vulndb-refresh: could not rewrite hack/lint-tools.sh" >&2; exit 1; }
  echo "vulndb-refresh: golang.org/x/vulndb $old → $new (hack/lint-tools.sh, docs/fuzzing.md)"
fi
hack/lint-tools.sh >/dev/null
hack/vulndb-age.sh
