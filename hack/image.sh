#!/usr/bin/env bash
# The watchdog's image, built by ko (hack/ko.sh) for linux/amd64 and linux/arm64 on
# IMAGE_BASE, as `make build` builds the binary (.ko.yaml), with the Dockerfile's
# user and labels and an SPDX SBOM per image in SBOM_DIR.
#
#   hack/image.sh layout DIR SBOM_DIR          an OCI image layout in DIR, nothing pushed
#   hack/image.sh push REPOSITORY TAG SBOM_DIR pushed with the SBOMs (ko's keychain: the
#                                              Docker config and its helpers); prints REPOSITORY@DIGEST
#
# IMAGE_BASE: a base pinned by digest (the release's: the Dockerfile's distroless), or
# `local`: this machine's CA bundle and a passwd with uid 65532 (`release base`),
# served to ko from a registry on loopback for the build, as ko reads bases only
# from a registry. VERSION, COMMIT and SOURCE_DATE_EPOCH (the image's time) as the
# Makefile sets them; INSECURE=1 pushes over plain http.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${VERSION:?}" "${COMMIT:?}" "${SOURCE_DATE_EPOCH:?}" "${DATE:?}"
export VERSION COMMIT DATE SOURCE_DATE_EPOCH
mode=$1
ko="$(hack/ko.sh)"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/watchdog-image.XXXXXX")"
registry=
trap 'if [[ -n "$registry" ]]; then kill "$registry" 2>/dev/null; wait "$registry" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
base="${IMAGE_BASE:-local}"
if [[ "$base" != local && "$base" != *@sha256:* ]]; then
  echo "hack/image.sh: IMAGE_BASE=$base: a base is pinned by digest (name@sha256:...), or local" >&2; exit 2
fi
if [[ "$base" == local ]]; then
  CGO_ENABLED=0 go build -o "$tmp/release" ./hack/release
  "$tmp/release" registry --addr 127.0.0.1:0 --addr-file "$tmp/addr" 2>"$tmp/registry.log" & registry=$!
  for _ in $(seq 100); do [[ -s "$tmp/addr" ]] && break; sleep 0.1; done
  [[ -s "$tmp/addr" ]] || { cat "$tmp/registry.log" >&2; echo "hack/image.sh: the local base's registry did not start in 10 s" >&2; exit 1; }
  base="$("$tmp/release" base --ref "$(cat "$tmp/addr")/watchdog/local-base:v1" --insecure)"
fi

labels="org.opencontainers.image.source=https://github.com/agentenv/watchdog,org.opencontainers.image.version=${VERSION}"
labels+=",org.opencontainers.image.revision=${COMMIT},org.opencontainers.image.licenses=MIT"
labels+=",org.opencontainers.image.title=agentenv-scheduler-watchdog"
labels+=",org.opencontainers.image.description=Detects a wedged AgentENV scheduler and restarts it safely"
args=(build ./cmd/watchdog --bare --sbom spdx --image-user 65532:65532 --image-label "$labels")
case "$mode" in
  layout)
    rm -rf "$2" "$3"
    args+=(--push=false --oci-layout-path "$2" --sbom-dir "$3")
    export KO_DOCKER_REPO=ko.invalid/scheduler-watchdog ;;
  push)
    args+=(--tags "$3" --sbom-dir "$4" ${INSECURE:+--insecure-registry})
    export KO_DOCKER_REPO="$2" ;;
  *) echo "usage: hack/image.sh layout DIR SBOM_DIR | push REPOSITORY TAG SBOM_DIR" >&2; exit 2 ;;
esac
# A registry that stops answering ends the build here, not at the job's timeout.
KO_DEFAULTBASEIMAGE="$base" timeout 15m "$ko" "${args[@]}"
