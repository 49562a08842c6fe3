#!/usr/bin/env bash
# make push: the image (hack/image.sh: ko builds and pushes the index and its SBOMs)
# and the chart (helm push) to REGISTRY, with the user's credentials (docker login
# or a credential helper for the image; helm registry login, else the Docker
# config, for the chart). Prints the digests and the helm install line that pins
# the pushed image. INSECURE=1: plain http.
#
#   REGISTRY=reg.example/team CHART=dist/CHART-VERSION.tgz HELM=helm hack/push.sh
set -euo pipefail
cd "$(dirname "$0")/.."
: "${REGISTRY:?}" "${CHART:?}" "${HELM:?}" "${VERSION:?}"
registry="${REGISTRY#oci://}"; registry="${registry%/}"
host="${registry%%/*}"
repo="$registry/scheduler-watchdog"
chart_name="$(tar -xzOf "$CHART" --wildcards '*/Chart.yaml' | sed -n 's/^name: *//p')"
chart_version="$(tar -xzOf "$CHART" --wildcards '*/Chart.yaml' | sed -n 's/^version: *//p')"
# git describe's v0.1.0-3-gabc-dirty as a tag: no leading v, only a tag's characters.
tag="${VERSION#v}"; tag="${tag//[^A-Za-z0-9_.-]/-}"
hint="(the registry refused the credentials or found none: \`docker login $host\`, or a credential helper in \$DOCKER_CONFIG/config.json, gives them)"

# make push builds on the release's base (the Makefile reads the Dockerfile's);
# IMAGE_BASE=local (offline) is not what a release ships: said first and last.
base="${IMAGE_BASE:-local}"
if [[ "$base" == local ]]; then
  base="local: THIS MACHINE'S CA BUNDLE AND PASSWD, NOT THE RELEASE'S BASE (the Dockerfile's distroless; drop IMAGE_BASE=local)"
  printf '%s\n' "make push: WARNING ************************************************************" \
    "make push: WARNING: IMAGE_BASE=local: the image is built on this machine's CA bundle and passwd," \
    "make push: WARNING: not on the release's base (the Dockerfile's distroless, pinned by digest)." \
    "make push: WARNING ************************************************************" >&2
fi
log="$(mktemp)"; trap 'rm -f "$log"' EXIT
if ! ref="$(set -o pipefail; hack/image.sh push "$repo" "$tag" "${SBOM_DIR:-dist/sbom}" 2>"$log" | tail -n1)"; then
  cat "$log" >&2
  if grep -qE 'UNAUTHORIZED|DENIED|401|403' "$log"; then echo "make push: the image to $repo: $hint" >&2; fi
  exit 1
fi
digest="${ref##*@}"
plain=${INSECURE:+--plain-http}
if ! out="$(timeout 10m "$HELM" push "$CHART" "oci://$registry/charts" $plain 2>&1)"; then
  echo "$out" >&2
  echo "make push: image $repo@$digest pushed; the chart: credentials: \`helm registry login $host\`, or \`docker login\`" >&2
  exit 1
fi
chart_digest="$(sed -n 's/^Digest: //p' <<<"$out")"
cat <<OUT

image:  $repo:$tag
        $repo@$digest
base:   $base
sbom:   $repo:${digest/:/-}.sbom (SPDX, attached as cosign attaches)
chart:  oci://$registry/charts/$chart_name:$chart_version
        $chart_digest
install:
  helm install watchdog oci://$registry/charts/$chart_name --version $chart_version${plain:+ $plain} -n agentenv-system --create-namespace --set image.repository=$repo --set image.digest=$digest
OUT
