#!/usr/bin/env bash
# Builds kube-apiserver, kubectl and etcd from the Go module proxy (no download sites
# are reachable here) and caches them in a versioned folder, so only the first run pays
# (~5 min, ~2.6 GB peak on 2 cores). Prints the folder holding the binaries; point
# KUBEBUILDER_ASSETS at it.
#
#   hack/control-plane.sh            build if missing, print the bin folder
#   hack/control-plane.sh --print    print the bin folder, fail if not built
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
CACHE_ROOT="${WATCHDOG_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/agentenv-watchdog}"
BIN_DIR="$CACHE_ROOT/control-plane/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}/bin"

have_all() { [[ -x "$BIN_DIR/kube-apiserver" && -x "$BIN_DIR/etcd" && -x "$BIN_DIR/kubectl" ]]; }

source "$(dirname "${BASH_SOURCE[0]}")/cache.sh"
cached_or_exit have_all "$BIN_DIR" "control plane not built; run hack/control-plane.sh" "$@"

export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
scratch_build cp
OUT="$SCRATCH/out"; mkdir -p "$OUT"

log() { echo "control-plane: $*" >&2; }

# --- kube-apiserver + kubectl -------------------------------------------------------
log "building kube-apiserver and kubectl ${K8S_VERSION} (first time only, ~5 min)"
source "$(dirname "${BASH_SOURCE[0]}")/k8s-module.sh"
k8s_module "$SCRATCH/k8s" watchdog.local/controlplane kube-apiserver kubectl
(
  cd "$SCRATCH/k8s"
  # One go build for both: one link runs while the other's packages still compile.
  go build -trimpath -ldflags "$K8S_LDFLAGS" -o "$OUT/" k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kubectl
)

# --- etcd ---------------------------------------------------------------------------
log "building etcd ${ETCD_VERSION}"
ETCD_MOD="$SCRATCH/etcd"; mkdir -p "$ETCD_MOD"
(
  cd "$ETCD_MOD"
  go mod init watchdog.local/etcd >/dev/null 2>&1
  go mod edit -require="go.etcd.io/etcd/server/v3@${ETCD_VERSION}"
  for m in go.etcd.io/etcd/api/v3 go.etcd.io/etcd/client/pkg/v3 go.etcd.io/etcd/client/v3 go.etcd.io/etcd/pkg/v3; do
    go mod edit -replace="$m=$m@${ETCD_VERSION}"
  done
  cat > tools.go <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
  go mod tidy >/dev/null
  go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3
)

mkdir -p "$(dirname "$BIN_DIR")"
rm -rf "$BIN_DIR.tmp"; mv "$OUT" "$BIN_DIR.tmp"; rm -rf "$BIN_DIR"; mv "$BIN_DIR.tmp" "$BIN_DIR"
log "cached in $BIN_DIR"
echo "$BIN_DIR"
