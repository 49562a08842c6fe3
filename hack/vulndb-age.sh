#!/usr/bin/env bash
# Prints the age of the vulnerability database govulncheck reads (hack/lint-tools.sh
# builds it from golang.org/x/vulndb at a pinned pseudo-version, whose timestamp is
# the date of its newest entry) and fails when it is older than VULNDB_MAX_AGE_DAYS
# (default 90): a pinned database goes stale silently, and a scan against it then
# says "no vulnerabilities" about everything published since.
#
#   hack/vulndb-age.sh                           the pinned database
#   VULNDB_MAX_AGE_DAYS=180 hack/vulndb-age.sh   a longer allowance
#   make vulndb-refresh                          pin the newest database and build it
#
# VULNDB_VERSION overrides the version read from hack/lint-tools.sh, VULNDB_NOW
# (anything `date -d` reads) the current time (tests).
set -euo pipefail
cd "$(dirname "$0")/.."
version="${VULNDB_VERSION:-$(hack/lint-tools.sh --vulndb-version)}"
max="${VULNDB_MAX_AGE_DAYS:-90}"
[[ "$max" =~ ^[0-9]+$ ]] || { echo "vulndb-age: VULNDB_MAX_AGE_DAYS=$max is not a number of days" >&2; exit 2; }

# v0.0.0-20261105234957-e22db6528018: the timestamp is the commit's, UTC.
stamp="${version#v0.0.0-}"; stamp="${stamp%%-*}"
if ! [[ "$stamp" =~ ^[0-9]{14}$ ]]; then
  echo "vulndb-age: cannot read a date from golang.org/x/vulndb@$version (want a pseudo-version)" >&2
  exit 1
fi
taken="${stamp:0:4}-${stamp:4:2}-${stamp:6:2}T${stamp:8:2}:${stamp:10:2}:${stamp:12:2}Z"
now="$(date -u -d "${VULNDB_NOW:-now}" +%s)"
age=$(( (now - $(date -u -d "$taken" +%s)) / 86400 ))

echo "vulnerability database: golang.org/x/vulndb@$version, as of $taken: $age days old (limit $max, VULNDB_MAX_AGE_DAYS)"
if (( age > max )); then
  echo "vulndb-age: the vulnerability database is $age days old, over the $max-day limit: refresh it with 'make vulndb-refresh' (or set VULNDB_MAX_AGE_DAYS)" >&2
  exit 1
fi
