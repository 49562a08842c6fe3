{{/* Prometheus Operator and Grafana objects (docs/monitoring.md). */}}

{{/* True ("true") when the PodMonitor is rendered: asked for, `watchdog run` serves the
metrics (mode: deployment), and the cluster serves the CRD. */}}
{{- define "watchdog.podMonitor" -}}
{{- if and .Values.monitoring.podMonitor.enabled (eq .Values.mode "deployment") (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/PodMonitor") -}}true{{- end -}}
{{- end -}}

{{/* True ("true") when the ServiceMonitor is rendered: asked for, `watchdog run` serves
the metrics through the chart's Service, and the cluster serves the CRD. */}}
{{- define "watchdog.serviceMonitor" -}}
{{- if and .Values.monitoring.serviceMonitor.enabled (eq .Values.mode "deployment") .Values.deployment.service.enabled (.Capabilities.APIVersions.Has "monitoring.coreos.com/v1/ServiceMonitor") -}}true{{- end -}}
{{- end -}}

{{/* True ("true") when each CronJob run pushes its metrics to a Pushgateway. */}}
{{- define "watchdog.pushgateway" -}}
{{- if and (eq .Values.mode "cronjob") .Values.monitoring.pushgateway.url -}}true{{- end -}}
{{- end -}}

{{/* True ("true") when the watchdog's own metrics reach Prometheus: served by
`watchdog run`, or pushed by each CronJob run. */}}
{{- define "watchdog.ownMetrics" -}}
{{- if or (eq .Values.mode "deployment") (include "watchdog.pushgateway" .) -}}true{{- end -}}
{{- end -}}

{{/* The TCP port of monitoring.pushgateway.url (its scheme's default when it names none). */}}
{{- define "watchdog.pushgatewayPort" -}}
{{- $u := urlParse .Values.monitoring.pushgateway.url -}}
{{- $host := get $u "host" -}}
{{- if regexMatch ":[0-9]+$" $host -}}{{ regexFind "[0-9]+$" $host }}{{- else if eq (get $u "scheme") "https" -}}443{{- else -}}80{{- end -}}
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

{{/* The runbook_url of an alert: the base URL and the alert's name in lower case. The
default base is docs/monitoring.md of the installed version (its release tag,
v<appVersion>), which exists for as long as the release does and describes the rules
this chart renders, where main may have moved on. */}}
{{- define "watchdog.runbook" -}}
{{- $base := .root.Values.monitoring.prometheusRule.runbookBaseURL | default (printf "https://github.com/agentenv/watchdog/blob/v%s/docs/monitoring.md" .root.Chart.AppVersion) -}}
{{- printf "%s#%s" (trimSuffix "/" $base) (lower .alert) -}}
{{- end -}}

{{/* watchdog.promCount: how much a counter of the watchdog rose within a window, per
series. Counters only grow in both modes (docs/monitoring.md, "Counters in each mode"):
`watchdog run` serves totals since its start, and each CronJob run pushes running
totals kept in the state ConfigMap. Both are counted with increase().

With `watchdog run`, a series Prometheus did not have one window ago also counts with
its whole value (watchdogs before every counter started at 0 created a labelled series
at its first increment; set operators match series ignoring the metric name, so each
series is counted once). Not for pushed totals: after failed scrapes of the
Pushgateway, a series absent one window ago would count every restart since the
install. */}}
{{- define "watchdog.promCount" -}}
{{- if include "watchdog.pushgateway" .root -}}
increase({{ .series }}[{{ .window }}])
{{- else -}}
({{ .series }} unless {{ .series }} offset {{ .window }}) or increase({{ .series }}[{{ .window }}])
{{- end -}}
{{- end -}}

{{/* Monitoring values that contradict each other. */}}
{{- define "watchdog.validateMonitoring" -}}
{{- $m := .Values.monitoring -}}
{{- if eq .Values.mode "deployment" -}}
{{- if and $m.podMonitor.enabled $m.serviceMonitor.enabled -}}
{{- fail "monitoring.podMonitor and monitoring.serviceMonitor are both enabled: Prometheus would scrape every watchdog twice; enable one" -}}
{{- end -}}
{{- if and $m.serviceMonitor.enabled (not .Values.deployment.service.enabled) -}}
{{- fail "monitoring.serviceMonitor needs deployment.service.enabled (it scrapes through that Service)" -}}
{{- end -}}
{{- if $m.pushgateway.url -}}
{{- fail "monitoring.pushgateway.url is for mode cronjob: watchdog run serves its metrics (monitoring.podMonitor or serviceMonitor)" -}}
{{- end -}}
{{- end -}}
{{- end -}}
