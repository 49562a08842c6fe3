{{/* Prometheus Operator and Grafana objects (docs/monitoring.md). */}}

{{/* True ("true") when the PodMonitor is rendered: asked for, `watchdog run` serves the
metrics (mode: deployment), and the cluster serves the CRD. */}}
{{- define "watchdog.podMonitor" -}}
{{- if and .Values.monitoring.podMonitor.enabled (eq .Values.mode "deployment") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PodMonitor") -}}true{{- end -}}
{{- end -}}

{{/* True ("true") when the PrometheusRule is rendered: asked for and the CRD is served. */}}
{{- define "watchdog.prometheusRule" -}}
{{- if and .Values.monitoring.prometheusRule.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PrometheusRule") -}}true{{- end -}}
{{- end -}}

{{/* PromQL matchers of the watchdog's own series: what the chart's PodMonitor produces
(it sets job to the full name), unless monitoring.prometheusRule.watchdogSelector says. */}}
{{- define "watchdog.promSelector" -}}
{{- default (printf "namespace=%q, job=%q" .Release.Namespace (include "watchdog.fullname" .)) .Values.monitoring.prometheusRule.watchdogSelector -}}
{{- end -}}

{{/* PromQL matchers of kube-state-metrics' series of the chart's CronJob. */}}
{{- define "watchdog.ksmNamespace" -}}
{{- printf "namespace=%q" .Release.Namespace -}}
{{- end -}}

{{/* PromQL matchers of the scheduler's own series. */}}
{{- define "watchdog.schedulerSelector" -}}
{{- default (printf "namespace=%q" (include "watchdog.watchNamespace" .)) .Values.monitoring.prometheusRule.scheduler.selector -}}
{{- end -}}

{{/* The runbook_url of an alert: the base URL and the alert's name in lower case. */}}
{{- define "watchdog.runbook" -}}
{{- printf "%s#%s" (trimSuffix "/" .root.Values.monitoring.prometheusRule.runbookBaseURL) (lower .alert) -}}
{{- end -}}

{{/* watchdog.promIncrease: how much a counter of the watchdog rose within a window, per
series. The watchdog creates a labelled counter at its first increment, which increase()
cannot see (it needs two samples of the series); a series Prometheus did not have one
window ago therefore counts with its whole value, the others with increase(). Set
operators match series ignoring the metric name, so each series is counted once. */}}
{{- define "watchdog.promIncrease" -}}
({{ .series }} unless {{ .series }} offset {{ .window }}) or increase({{ .series }}[{{ .window }}])
{{- end -}}
