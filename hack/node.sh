#!/usr/bin/env bash
# Builds the node half of a real one-node cluster (hack/cluster.sh): kube-controller-manager,
# kube-scheduler, kubelet and kube-proxy, from the Go module proxy exactly as
# hack/control-plane.sh builds kube-apiserver (a scratch module re-pointing the
# ./staging replaces at their published releases). Its own versioned cache folder, so the
# control plane's stays as it is. Prints the folder holding the binaries.
#
#   hack/node.sh            build if missing, print the bin folder
#   hack/node.sh --print    print the bin folder, fail if not built
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/node/k8s-${K8S_VERSION}/bin"
COMPONENTS=(kube-controller-manager kube-scheduler kubelet kube-proxy)

have_all() {
  local c
  for c in "${COMPONENTS[@]}"; do [[ -x "$BIN_DIR/$c" ]] || return 1; done
}

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have_all "$BIN_DIR" "node binaries not built; run hack/node.sh" "$@"

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build node
OUT="$SCRATCH/out"; mkdir -p "$OUT"

log() { echo "node: $*" >&2; }

log "building ${COMPONENTS[*]} ${K8S_VERSION} (first time only; docs/performance.md has the time)"
source "$(dirname "${BASH_SOURCE[0]}")/k8s-module.sh"
k8s_module "$SCRATCH/k8s" watchdog.local/node "${COMPONENTS[@]}"
(
  cd "$SCRATCH/k8s"
  # One go build for all four (each named after its package): the links run while
  # other packages still compile, instead of one core idling through each link.
  go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$OUT/" "${COMPONENTS[@]/#/k8s.io/kubernetes/cmd/}"
)

mkdir -p "$(dirname "$BIN_DIR")"
rm -rf "$BIN_DIR.tmp"; mv "$OUT" "$BIN_DIR.tmp"; rm -rf "$BIN_DIR"; mv "$BIN_DIR.tmp" "$BIN_DIR"
log "cached in $BIN_DIR"
echo "$BIN_DIR"
