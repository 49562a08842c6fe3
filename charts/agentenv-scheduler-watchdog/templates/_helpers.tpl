{{/* Names ------------------------------------------------------------------------ */}}

{{- define "watchdog.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "watchdog.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "watchdog.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "watchdog.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "watchdog.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The namespace the watchdog watches: the scheduler's. The Role, its binding, the
state ConfigMap and the election Lease live there; everything else in the release's. */}}
{{- define "watchdog.watchNamespace" -}}
{{- default .Release.Namespace .Values.scheduler.namespace -}}
{{- end -}}

{{- define "watchdog.secretName" -}}
{{- default (include "watchdog.fullname" .) .Values.alerts.existingSecret -}}
{{- end -}}

{{/* True ("true") when the chart creates the alerts Secret: always, unless
alerts.existingSecret names one. Without a sink it holds the outbox key alone, so
that the alerts a sink added later keeps for retry are authenticated from the start
(docs/alerts.md, "The outbox"). */}}
{{- define "watchdog.createSecret" -}}
{{- if not .Values.alerts.existingSecret -}}true{{- end -}}
{{- end -}}

{{/* True ("true") when a sink may be configured: a sink value, or alerts.existingSecret. */}}
{{- define "watchdog.sinksConfigured" -}}
{{- $a := .Values.alerts -}}
{{- if or $a.existingSecret $a.slackWebhookURL $a.webhookURL $a.webhookSecret $a.heartbeatURL $a.alertmanagerURLs $a.alertmanagerUsername $a.alertmanagerPassword $a.alertmanagerBearerToken -}}true{{- end -}}
{{- end -}}

{{/* True ("true") when `watchdog run` elects a leader: deployment mode with replicas > 1. */}}
{{- define "watchdog.leaderElect" -}}
{{- if and (eq .Values.mode "deployment") (gt (int .Values.deployment.replicas) 1) -}}true{{- end -}}
{{- end -}}

{{/* Labels ----------------------------------------------------------------------- */}}

{{- define "watchdog.selectorLabels" -}}
app.kubernetes.io/name: {{ include "watchdog.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The watchdog's own pods (both modes), e.g. for the PodDisruptionBudget and the spread. */}}
{{- define "watchdog.podSelectorLabels" -}}
{{ include "watchdog.selectorLabels" . }}
app.kubernetes.io/component: watchdog
{{- end -}}

{{- define "watchdog.labels" -}}
helm.sh/chart: {{ include "watchdog.chart" . }}
{{ include "watchdog.selectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agentenv
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "watchdog.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Durations -------------------------------------------------------------------- */}}

{{/* watchdog.seconds turns a Go duration ("90s", "1h30m", "2.5m", "0") into whole
seconds, rounded up, so templates can compare durations with each other. */}}
{{- define "watchdog.seconds" -}}
{{- $total := 0.0 -}}
{{- $units := dict "ns" 0.000000001 "us" 0.000001 "µs" 0.000001 "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $unit := trimPrefix $num $part -}}
{{- $total = addf $total (mulf (float64 $num) (get $units $unit)) -}}
{{- end -}}
{{- ceil $total | int64 -}}
{{- end -}}

{{/* Consistency checks the schema cannot express (it sees one value at a time). */}}
{{- define "watchdog.validate" -}}
{{- $v := .Values -}}
{{- $timeout := include "watchdog.seconds" $v.run.timeout | int64 -}}
{{- $confirm := include "watchdog.seconds" $v.decision.confirmWindow | int64 -}}
{{- $scrape := include "watchdog.seconds" $v.scheduler.scrapeTimeout | int64 -}}
{{- if ge $confirm $timeout -}}
{{- fail (printf "run.timeout (%s) must be longer than decision.confirmWindow (%s): a confirmation has to fit inside one run" $v.run.timeout $v.decision.confirmWindow) -}}
{{- end -}}
{{- if ge $scrape $timeout -}}
{{- fail (printf "scheduler.scrapeTimeout (%s) must be shorter than run.timeout (%s)" $v.scheduler.scrapeTimeout $v.run.timeout) -}}
{{- end -}}
{{- if eq $v.mode "cronjob" -}}
{{- $deadline := int64 $v.cronjob.activeDeadlineSeconds -}}
{{- if le $deadline $timeout -}}
{{- fail (printf "cronjob.activeDeadlineSeconds (%d) must be longer than run.timeout (%s = %ds): the watchdog must hit its own deadline first and report why" $deadline $v.run.timeout $timeout) -}}
{{- end -}}
{{- /* For the common every-N-minutes schedules the interval is known: a run must end before the next is due. */ -}}
{{- $every := regexFind "^\\*/[0-9]+ \\* \\* \\* \\*$" (trim $v.cronjob.schedule) -}}
{{- if $every -}}
{{- $interval := mul (regexFind "[0-9]+" $every | int64) 60 -}}
{{- if ge $deadline $interval -}}
{{- fail (printf "cronjob.activeDeadlineSeconds (%d) must be shorter than the schedule's interval (%q = %ds): with concurrencyPolicy Forbid a longer run makes the next one skip" $deadline $v.cronjob.schedule $interval) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $v.dryRun $v.decision.shadow -}}
{{- fail "dryRun and decision.shadow: choose one (a dry run writes and sends nothing; shadow mode keeps its record and restarts nothing)" -}}
{{- end -}}
{{- if and $v.alerts.webhookSecret (not $v.alerts.webhookURL) -}}
{{- fail "alerts.webhookSecret is set but alerts.webhookURL is not" -}}
{{- end -}}
{{- if and $v.alerts.existingSecret (or $v.alerts.slackWebhookURL $v.alerts.webhookURL $v.alerts.webhookSecret $v.alerts.heartbeatURL $v.alerts.alertmanagerURLs $v.alerts.alertmanagerUsername $v.alerts.alertmanagerPassword $v.alerts.alertmanagerBearerToken) -}}
{{- fail "set either alerts.existingSecret or the alert URLs/secret values, not both" -}}
{{- end -}}
{{- if and (include "watchdog.leaderElect" .) (eq $v.scheduler.leaderLease $v.deployment.leaderElection.lease) -}}
{{- fail "deployment.leaderElection.lease must differ from scheduler.leaderLease: the watchdog would take over the scheduler's own election" -}}
{{- end -}}
{{- if and (not .Values.serviceAccount.create) (not .Values.serviceAccount.name) -}}
{{- fail "serviceAccount.create is false: set serviceAccount.name to the ServiceAccount to run as (never the namespace's default)" -}}
{{- end -}}
{{- /* Every pod of the namespace that names no ServiceAccount runs as `default`: the
Role bound to it would be theirs too. */ -}}
{{- if eq (include "watchdog.serviceAccountName" .) "default" -}}
{{- fail "serviceAccount.name: default is the namespace's default ServiceAccount, which every pod without a serviceAccountName runs as: the watchdog's Role would be theirs too. Name a ServiceAccount of the watchdog's own" -}}
{{- end -}}
{{- end -}}

{{/* Container ------------------------------------------------------------------- */}}

{{/* Environment of the watchdog container: every setting as WATCHDOG_<FLAG> (args stay
short and readable in `kubectl describe`), secrets through secretKeyRef only. */}}
{{- define "watchdog.env" -}}
{{- $v := .Values -}}
{{- $flags := list
  (list "NAMESPACE" (include "watchdog.watchNamespace" .))
  (list "STATE_CONFIGMAP" $v.state.configMapName)
  (list "TIMEOUT" $v.run.timeout)
  (list "API_TIMEOUT" $v.run.apiTimeout)
  (list "LOG_LEVEL" $v.run.logLevel)
  (list "LOG_FORMAT" $v.run.logFormat)
  (list "SCHEDULER_SELECTOR" $v.scheduler.selector)
  (list "SCHEDULER_CONTAINER" $v.scheduler.container)
  (list "DEPLOYMENT" $v.scheduler.deployment)
  (list "METRICS_PORT" (int64 $v.scheduler.metricsPort))
  (list "METRICS_PATH" $v.scheduler.metricsPath)
  (list "SCRAPE_TIMEOUT" $v.scheduler.scrapeTimeout)
  (list "METRICS_MAX_BYTES" (int64 $v.scheduler.metricsMaxBytes))
  (list "NODES_SERVICE" $v.scheduler.nodesService)
  (list "NODES_PORT" (int64 $v.scheduler.nodesPort))
  (list "LEADER_LEASE" $v.scheduler.leaderLease)
  (list "JUDGE_PODS" $v.scheduler.judgePods)
  (list "MAX_PODS" (int64 $v.scheduler.maxPods))
  (list "STARTUP_GRACE" $v.decision.startupGrace)
  (list "WEDGED_FOR" $v.decision.wedgedFor)
  (list "CONFIRM_WINDOW" $v.decision.confirmWindow)
  (list "SAMPLE_INTERVAL" $v.decision.sampleInterval)
  (list "MAX_WATCH_AGE" $v.decision.maxWatchAge)
  (list "RESTART_ON_DEGRADED" $v.decision.restartOnDegraded)
  (list "SHADOW" $v.decision.shadow)
  (list "RESTART_METHOD" $v.restart.method)
  (list "MAX_RESTARTS" (int64 $v.restart.maxRestarts))
  (list "RESTART_WINDOW" $v.restart.window)
  (list "RESTART_BACKOFF" $v.restart.backoff)
  (list "RESTART_BACKOFF_MAX" $v.restart.backoffMax)
  (list "HOLD_RESTARTS_ON_ALERT" (join "\n" (default (list) $v.restart.holdOnAlerts)))
  (list "DRY_RUN" $v.dryRun)
  (list "CLUSTER_NAME" $v.alerts.clusterName)
  (list "RUNBOOK_URL" $v.alerts.runbookURL)
  (list "REALERT_INTERVAL" $v.alerts.realertInterval)
  (list "BLIND_AFTER" (int64 $v.alerts.blindAfter))
  (list "ALERT_TIMEOUT" $v.alerts.timeout)
  (list "ALERTMANAGER_ALERT_TTL" $v.alerts.alertmanagerAlertTTL)
  (list "ALERTMANAGER_GENERATOR_URL" $v.alerts.alertmanagerGeneratorURL)
  (list "EVIDENCE_CONFIGMAP" $v.evidence.configMapName)
  (list "EVIDENCE_LOGS" $v.evidence.logs)
-}}
{{- if include "watchdog.pushgateway" . }}
{{- $flags = concat $flags (list
  (list "PUSHGATEWAY_URL" $v.monitoring.pushgateway.url)
  (list "PUSHGATEWAY_JOB" (include "watchdog.fullname" .))
  (list "PUSHGATEWAY_GROUPING" (printf "namespace=%s" .Release.Namespace))
  (list "PUSHGATEWAY_TIMEOUT" $v.monitoring.pushgateway.timeout)
) }}
{{- end }}
{{- range $flags }}
- name: WATCHDOG_{{ index . 0 }}
  value: {{ index . 1 | toString | quote }}
{{- end }}
{{- $secret := include "watchdog.secretName" . }}
{{- $keys := $v.alerts.existingSecretKeys }}
{{- range $env, $key := dict "SLACK_WEBHOOK_URL" $keys.slackWebhookURL "WEBHOOK_URL" $keys.webhookURL "WEBHOOK_SECRET" $keys.webhookSecret "HEARTBEAT_URL" $keys.heartbeatURL "ALERTMANAGER_URL" $keys.alertmanagerURL "ALERTMANAGER_USERNAME" $keys.alertmanagerUsername "ALERTMANAGER_PASSWORD" $keys.alertmanagerPassword "ALERTMANAGER_BEARER_TOKEN" $keys.alertmanagerBearerToken "OUTBOX_KEY" $keys.outboxKey }}
- name: WATCHDOG_{{ $env }}
  valueFrom:
    secretKeyRef:
      name: {{ $secret }}
      key: {{ $key }}
      # The Secret holds only the sinks in use; an absent key is an unused sink.
      optional: true
{{- end }}
{{- with include "watchdog.goMemLimit" . }}
# A soft limit under the container's (watchdog.goMemLimit): the GC works harder
# before the kernel would OOM-kill.
- name: GOMEMLIMIT
  value: {{ . | quote }}
{{- end }}
{{- with $v.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* watchdog.goMemLimit: GOMEMLIMIT in bytes, 90% of resources.limits.memory ("" without
a limit). The Go runtime's limit covers only the memory it manages: stacks, the binary
and the kernel's accounting of page cache need the rest, so a GOMEMLIMIT equal to the
container's limit lets the kernel kill first. */}}
{{- define "watchdog.goMemLimit" -}}
{{- $q := (.Values.resources.limits | default dict).memory -}}
{{- if $q -}}
{{- $bytes := 0.0 -}}
{{- if kindIs "string" $q -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $q -}}
{{- $units := dict "" 1.0 "k" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 -}}
{{- $suffix := trimPrefix $num $q -}}
{{- if or (not $num) (not (hasKey $units $suffix)) -}}
{{- fail (printf "resources.limits.memory %q: give it in bytes or with a suffix (Ki, Mi, Gi, Ti, k, M, G, T)" $q) -}}
{{- end -}}
{{- $bytes = mulf (float64 $num) (get $units $suffix) -}}
{{- else -}}
{{- $bytes = float64 $q -}}
{{- end -}}
{{- mulf $bytes 0.9 | floor | int64 -}}
{{- end -}}
{{- end -}}

{{/* Pod spec fields shared by the CronJob's and the Deployment's pods. */}}
{{- define "watchdog.podCommon" -}}
serviceAccountName: {{ include "watchdog.serviceAccountName" . }}
# The SA does not automount its token; the watchdog's pod asks for it explicitly.
automountServiceAccountToken: true
enableServiceLinks: false
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{/* watchdog.outboxKey: a random key of the watchdog's own in the chart's Secret
(alerts.existingSecretKeys.outboxKey), generated at the first install and kept by
every upgrade (lookup). One value per render: secret.yaml and checksum/secret both
render it, so it is kept in the values of this render. Because the Secret holds it,
checksum/secret tells nothing about the Secret's other values: without it, anyone who
can read pods could test password guesses against the digest offline. */}}
{{- define "watchdog.outboxKey" -}}
{{- $a := .Values.alerts -}}
{{- if not (hasKey $a "_outboxKey") -}}
{{- $key := "" -}}
{{- with lookup "v1" "Secret" .Release.Namespace (include "watchdog.secretName" .) -}}
{{- with .data -}}
{{- $key = get . $a.existingSecretKeys.outboxKey | b64dec -}}
{{- end -}}
{{- end -}}
{{- $_ := set $a "_outboxKey" (default (randAlphaNum 43) $key) -}}
{{- end -}}
{{- $a._outboxKey -}}
{{- end -}}

{{/* Pod annotations. checksum/secret rolls the Deployment's pods when the Secret
changes (a running process read it at start); the CronJob needs none: each Job's pod
reads the Secret when it starts. */}}
{{- define "watchdog.podAnnotations" -}}
{{- $ann := deepCopy (default dict .Values.podAnnotations) -}}
{{- if and (include "watchdog.createSecret" .) (eq .Values.mode "deployment") -}}
{{- $_ := set $ann "checksum/secret" (include (print $.Template.BasePath "/secret.yaml") . | sha256sum) -}}
{{- end -}}
{{- with $ann }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* commonLabels and podLabels both land on the pod templates: a key in both would be a
duplicate YAML key, which parsers resolve differently. */}}
{{- define "watchdog.validateLabels" -}}
{{- range $k, $_ := .Values.podLabels -}}
{{- if hasKey $.Values.commonLabels $k -}}
{{- fail (printf "label %q is in both commonLabels and podLabels: set it in one (commonLabels reach the pods too)" $k) -}}
{{- end -}}
{{- end -}}
{{- end -}}
