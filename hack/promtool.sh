#!/usr/bin/env bash
# promtool, the Prometheus rules checker, unit-test runner and TSDB importer: built
# with the Prometheus server by hack/prometheus.sh (one go install, one cache
# folder). Prints promtool's path.
#
#   hack/promtool.sh            build prometheus and promtool if missing, print promtool's path
#   hack/promtool.sh --print    print promtool's path, fail if not built
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
if [[ "${1:-}" == "--print" ]]; then
  exec "$here/prometheus.sh" --print-promtool
fi
"$here/prometheus.sh" >/dev/null
exec "$here/prometheus.sh" --print-promtool
