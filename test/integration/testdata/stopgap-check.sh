#!/usr/bin/env bash
# The kind of kubectl + curl + jq CronJob script the watchdog replaces, doing the
# same reads and writes as one `watchdog check` of a healthy pod: list the
# scheduler pods, list the agentenv-nodes EndpointSlices and count serving nodes,
# scrape the metrics, read the state ConfigMap and write it back. Used only by
# BenchmarkCheckVsScript to compare costs. Needs KUBECONFIG, NS, METRICS_PORT.
set -euo pipefail
k() { kubectl --kubeconfig "$KUBECONFIG" -n "$NS" "$@"; }

pods=$(k get pods -l app.kubernetes.io/name=agentenv-scheduler -o json)
pod=$(jq -r '.items[0].metadata.name' <<<"$pods")
ip=$(jq -r '.items[0].status.podIP' <<<"$pods")

expected=$(k get endpointslices -l kubernetes.io/service-name=agentenv-nodes -o json | jq '
  [.items[] | select(any(.ports[]?; .port == 8000)) | .endpoints[]?
   | select(.conditions.serving == true and (.conditions.terminating // false) == false
            and .targetRef.name != null and ((.addresses // []) | length) > 0)
   | .targetRef.name] | unique | length')

ready=$(curl -sf --max-time 5 "http://$ip:$METRICS_PORT/metrics" \
  | awk '/^agentenv_scheduler_observed_nodes\{status="ready"\}/ {print $2}')

state=$(k get configmap agentenv-scheduler-watchdog -o json 2>/dev/null || echo '{"data":{}}')
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
jq --arg pod "$pod" --arg now "$now" --argjson ready "${ready:-0}" --argjson expected "$expected" '
  {apiVersion: "v1", kind: "ConfigMap",
   metadata: {name: "agentenv-scheduler-watchdog", namespace: .metadata.namespace, resourceVersion: .metadata.resourceVersion},
   data: {"state.json": ({version: 1, lastRun: {at: $now, pod: $pod, ready: $ready, expected: $expected}} | tojson)}}' \
  <<<"$state" | k replace -f - >/dev/null
echo "pod=$pod ready=$ready expected=$expected"
