# Sourced by the hack/ scripts that build or fetch a tool from the Go module proxy
# and cache it in a versioned folder (control-plane.sh, tools.sh, alertmanager.sh,
# prometheus.sh, lint-tools.sh, prometheus-operator-crds.sh): their shared steps.

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
  # No DWARF compiled: the tools link stripped (-s -w) or are never debugged, and the
  # compiler's DWARF is ~10% of its CPU (docs/performance.md). Every tool alike, so the
  # shared build cache still shares.
  export GOFLAGS="${GOFLAGS:+$GOFLAGS }-gcflags=all=-dwarf=false"
}

# install_binary SRC DST: copy a built binary into the cache atomically, so that a
# concurrent or interrupted run never leaves half a binary behind.
install_binary() {
  mkdir -p "$(dirname "$2")"
  cp "$1" "$2.tmp.$$" && mv -f "$2.tmp.$$" "$2"
}

# debian_binaries PKG UPSTREAM DEST SRC:NAME...: Debian's build of a tool instead of
# compiling it: `apt-get download` of PKG (its package lists fetched first when
# missing, as root) and `dpkg-deb -x` into a scratch folder (nothing installed, no
# service started), /usr/bin/SRC copied to DEST/NAME. Returns 1, saying why, where
# that cannot be done (no apt, no lists, the archive has another upstream version
# than UPSTREAM, the one the tests ran against): the caller then builds from the Go
# module. WATCHDOG_TOOLS_FROM=module skips Debian.
debian_binaries() {
  local pkg=$1 upstream=$2 dest=$3 cand deb d pair
  shift 3
  [[ "${WATCHDOG_TOOLS_FROM:-debian}" != module ]] || return 1
  if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
    echo "$pkg: no apt-get and dpkg-deb (not Debian): building from the Go module" >&2; return 1
  fi
  candidate() { apt-cache policy "$pkg" 2>/dev/null | sed -n 's/^ *Candidate: //p'; }
  cand="$(candidate)"
  if [[ -z "$cand" || "$cand" == "(none)" ]] && [[ "$(id -u)" == 0 ]]; then
    # One update at a time (make -j2 fetches two tools at once); the second finds the lists.
    {
      flock 9
      cand="$(candidate)"
      if [[ -z "$cand" || "$cand" == "(none)" ]]; then apt-get update -qq >&2 || true; cand="$(candidate)"; fi
    } 9>"${TMPDIR:-/tmp}/watchdog-apt-update.lock"
  fi
  # 2.42.0+ds-5+b6 -> 2.42.0: the upstream release, whatever Debian's rebuild suffix.
  if [[ "${cand%%[+-]*}" != "$upstream" ]]; then
    echo "$pkg: Debian's package is '${cand:-none}', not ${upstream} (the version the tests ran against): building from the Go module" >&2; return 1
  fi
  d="$(mktemp -d "${TMPDIR:-/tmp}/watchdog-deb-$pkg.XXXXXX")"
  if ! (cd "$d" && apt-get download -q -o APT::Sandbox::User=root "$pkg=$cand" >&2) || ! deb="$(ls "$d"/*.deb)" || ! dpkg-deb -x "$deb" "$d/x"; then
    rm -rf "$d"; echo "$pkg: apt-get download of ${cand} failed: building from the Go module" >&2; return 1
  fi
  for pair in "$@"; do install_binary "$d/x/usr/bin/${pair%%:*}" "$dest/${pair#*:}"; done
  rm -rf "$d"
  echo "$pkg: Debian's ${cand} cached in $dest" >&2
}
