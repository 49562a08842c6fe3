#!/usr/bin/env bash
# The performance targets' yardstick (docs/performance.md): "a kubectl + curl + jq CronJob script that reads less (one
# pod list, one scrape, one ConfigMap read)", quoted there at about 160 ms wall,
# 180 ms CPU and 47 MiB peak per run. BenchmarkCheckVsScript runs it beside the
# watchdog to tell how this machine compares with the one those figures came from.
# Needs KUBECONFIG, NS, METRICS_PORT.
set -euo pipefail
k() { kubectl --kubeconfig "$KUBECONFIG" -n "$NS" "$@"; }

pods=$(k get pods -l app.kubernetes.io/name=agentenv-scheduler -o json)
ip=$(jq -r '.items[0].status.podIP' <<<"$pods")
ready=$(curl -sf --max-time 5 "http://$ip:$METRICS_PORT/metrics" \
  | awk '/^agentenv_scheduler_observed_nodes\{status="ready"\}/ {print $2}')
since=$(k get configmap agentenv-scheduler-watchdog -o json | jq -r '.data["state.json"] // "{}" | fromjson | .lastRun.at // ""')
echo "ready=$ready since=$since"
