# Sourced by the hack/ scripts that build or fetch a tool from the Go module proxy
# and cache it in a versioned folder (control-plane.sh, tools.sh, alertmanager.sh,
# prometheus.sh, lint-tools.sh, prometheus-operator-crds.sh): their shared two steps.

# cached_or_exit HAVE PATH MISSING ARGS...: with --print, print PATH if the check
# HAVE (a function of the caller) passes, else fail saying MISSING; without it, a
# cached tool prints PATH and ends the script. Otherwise it returns: build.
cached_or_exit() {
  local have=$1 path=$2 missing=$3
  shift 3
  if [[ "${1:-}" == "--print" ]]; then
    "$have" || { echo "$missing" >&2; exit 1; }
    echo "$path"; exit 0
  fi
  if "$have"; then echo "$path"; exit 0; fi
}

# scratch_build NAME: a throwaway build cache and GOBIN in $SCRATCH, removed when the
# script exits: nothing of the build stays but what the script copies out (the
# Kubernetes build alone fills ~4 GB). With WATCHDOG_TOOLS_GOCACHE (.ci/run sets it to
# a directory it removes at the end) the tools share one build cache instead, so the
# standard library and the modules they have in common compile once per CI run, not
# once per tool.
scratch_build() {
  SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/watchdog-$1.XXXXXX")"
  trap 'chmod -R u+w "$SCRATCH" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT
  export GOCACHE="${WATCHDOG_TOOLS_GOCACHE:-$SCRATCH/gocache}" GOBIN="$SCRATCH/bin"
}

# install_binary SRC DST: copy a built binary into the cache atomically, so that a
# concurrent or interrupted run never leaves half a binary behind.
install_binary() {
  mkdir -p "$(dirname "$2")"
  cp "$1" "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"
}
