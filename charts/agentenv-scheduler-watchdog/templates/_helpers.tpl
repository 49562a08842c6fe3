{{/* Names ------------------------------------------------------------------------ */}}

{{- define "watchdog.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "watchdog.fullname" -}}
{{- include "watchdog.reusedValues" . -}}
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

{{/* The key Secret the watchdog creates (pkg/kube EnsureKey). */}}
{{- define "watchdog.secretName" -}}
{{- default (include "watchdog.fullname" .) .Values.alerts.existingSecret -}}
{{- end -}}

{{/* `helm upgrade --reuse-values` renders this chart with the previous chart's values,
which lack every value added since: fail first, naming a missing value and the fix,
instead of a nil pointer deep in a template. The values added since 0.1.0 (a value
added later is defaulted in the templates, like state.keySecretName, or listed here). */}}
{{- define "watchdog.reusedValues" -}}
{{- range list "global" "scheduler.judgePods" "scheduler.grpcPort" "probe" "restart.holdOnAlerts" "alerts.extraLabels" "evidence" "deployment.watchEndpoints" "networkPolicy.pushgatewayTo" "caBundle" "extraVolumes" "extraVolumeMounts" "monitoring.schedulerPodMonitor" "monitoring.serviceMonitor" "monitoring.pushgateway" -}}
{{- $path := splitList "." . -}}
{{- $parent := $.Values -}}
{{- if eq (len $path) 2 -}}{{- $parent = get $.Values (first $path) -}}{{- end -}}
{{- if not (and (kindIs "map" $parent) (hasKey $parent (last $path))) -}}
{{- fail (printf "value %s is missing: these are an older chart's values (helm upgrade --reuse-values keeps them, without this chart's new defaults); upgrade with --reset-then-reuse-values (Helm >= 3.14)" .) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* True ("true") when the chart renders its alerts Secret: not with
alerts.existingSecret; otherwise when a secret value is set, or when a 0.1.0 release's
Secret holds the outbox-key that chart generated (watchdog.legacyKey). */}}
{{- define "watchdog.createSecret" -}}
{{- if and (not .Values.alerts.existingSecret) (or (include "watchdog.sinksConfigured" .) (include "watchdog.legacyKey" .)) -}}true{{- end -}}
{{- end -}}

{{/* The key Secret's name; defaulted here too, for `helm upgrade --reuse-values` from
0.1.0, whose values lack it. */}}
{{- define "watchdog.keySecret" -}}
{{- default "agentenv-scheduler-watchdog-key" .Values.state.keySecretName -}}
{{- end -}}

{{/* watchdog.legacyKey: the outbox-key 0.1.0's chart generated into its Secret, read
back (lookup: "" under helm template, so every render is the same). The chart generates
nothing: the watchdog creates its key Secret at its first real pass (state.keySecretName),
seeded with this one through WATCHDOG_OUTBOX_KEY, so an upgrade keeps its key. */}}
{{- define "watchdog.legacyKey" -}}
{{- if not .Values.alerts.existingSecret -}}
{{- with lookup "v1" "Secret" .Release.Namespace (include "watchdog.fullname" .) -}}
{{- with .data -}}{{- get . $.Values.alerts.existingSecretKeys.outboxKey | b64dec -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* True ("true") when a sink may be configured: a sink value, or alerts.existingSecret. */}}
{{- define "watchdog.sinksConfigured" -}}
{{- $a := .Values.alerts -}}
{{- if or $a.existingSecret $a.slackWebhookURL $a.webhookURL $a.webhookSecret $a.heartbeatURL $a.alertmanagerURLs $a.alertmanagerUsername $a.alertmanagerPassword $a.alertmanagerBearerToken -}}true{{- end -}}
{{- end -}}

{{/* True ("true") when `watchdog run` elects a leader: deployment mode with replicas > 1. */}}
{{- define "watchdog.watchEndpoints" -}}
{{- if and (eq .Values.mode "deployment") .Values.deployment.watchEndpoints -}}true{{- end -}}
{{- end -}}

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
{{- $repo := .Values.image.repository -}}
{{- with (.Values.global | default dict).imageRegistry -}}
{{- /* A mirror: its registry replaces image.repository's (the first path element
when it names a host: a dot, a port or localhost), keeping the image's path. */ -}}
{{- $parts := splitList "/" $repo -}}
{{- $first := first $parts -}}
{{- if and (gt (len $parts) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) -}}
{{- $parts = rest $parts -}}
{{- end -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) (join "/" $parts) -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repo .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) -}}
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

{{/* watchdog.cronInterval is the shortest gap, in seconds, between two runs of a
CronJob schedule (five fields or a macro), read as the CronJob controller reads it
(robfig/cron's standard syntax): the minute and hour fields give the run times of a
day; the gap across midnight is counted as if the next day runs too, so a schedule
whose days are restricted (day of month, month, day of week) is judged by its
busiest day and a daily or rarer one counts as a day. */}}
{{- define "watchdog.cronInterval" -}}
{{- $spec := trim (toString .) -}}
{{- $macros := dict "@yearly" "0 0 1 1 *" "@annually" "0 0 1 1 *" "@monthly" "0 0 1 * *" "@weekly" "0 0 * * 0" "@daily" "0 0 * * *" "@midnight" "0 0 * * *" "@hourly" "0 * * * *" -}}
{{- $spec = get $macros $spec | default $spec -}}
{{- $fields := regexSplit "\\s+" $spec -1 -}}
{{- if ne (len $fields) 5 -}}
{{- fail (printf "cronjob.schedule %q: want five fields (minute hour day-of-month month day-of-week) or a macro such as @hourly" . ) -}}
{{- end -}}
{{- $minutes := include "watchdog.cronField" (list (index $fields 0) "minute" 0 59) | splitList "," -}}
{{- $hours := include "watchdog.cronField" (list (index $fields 1) "hour" 0 23) | splitList "," -}}
{{- $first := -1 -}}
{{- $prev := -1 -}}
{{- $gap := 1440 -}}
{{- range $h := until 24 -}}
{{- if has (toString $h) $hours -}}
{{- range $m := until 60 -}}
{{- if has (toString $m) $minutes -}}
{{- $t := add (mul $h 60) $m -}}
{{- if ge $prev 0 -}}
{{- $gap = min $gap (sub $t $prev) -}}
{{- else -}}
{{- $first = $t -}}
{{- end -}}
{{- $prev = $t -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $gap = min $gap (add (sub 1440 $prev) $first) -}}
{{- mul $gap 60 -}}
{{- end -}}

{{/* watchdog.cronField expands one cron field (list: text, name, lowest, highest)
into its values, comma-separated: "*", "a", "a-b", each with an optional "/step"
("a/step" runs from a to the highest), joined by commas. */}}
{{- define "watchdog.cronField" -}}
{{- $text := index . 0 -}}
{{- $name := index . 1 -}}
{{- $lowest := index . 2 | int -}}
{{- $highest := index . 3 | int -}}
{{- $out := list -}}
{{- range $part := splitList "," $text -}}
{{- if not (regexMatch "^(\\*|[0-9]+(-[0-9]+)?)(/[0-9]+)?$" $part) -}}
{{- fail (printf "cronjob.schedule: cannot read the %s field %q (want *, a number, a-b, each with an optional /step, comma-separated)" $name $text) -}}
{{- end -}}
{{- $rangeStep := splitList "/" $part -}}
{{- $step := 1 -}}
{{- if gt (len $rangeStep) 1 -}}
{{- $step = index $rangeStep 1 | int -}}
{{- end -}}
{{- $lo := $lowest -}}
{{- $hi := $highest -}}
{{- $r := index $rangeStep 0 -}}
{{- if ne $r "*" -}}
{{- $bounds := splitList "-" $r -}}
{{- $lo = index $bounds 0 | int -}}
{{- if gt (len $bounds) 1 -}}
{{- $hi = index $bounds 1 | int -}}
{{- else if eq (len $rangeStep) 1 -}}
{{- $hi = $lo -}}
{{- end -}}
{{- end -}}
{{- if or (lt $step 1) (lt $lo $lowest) (gt $hi $highest) (gt $lo $hi) -}}
{{- fail (printf "cronjob.schedule: the %s field %q is out of range (%d-%d, step at least 1)" $name $text $lowest $highest) -}}
{{- end -}}
{{- $out = concat $out (untilStep $lo (add1 $hi | int) $step) -}}
{{- end -}}
{{- join "," $out -}}
{{- end -}}

{{/* watchdog.alertLabels is alerts.extraLabels as --alert-labels takes it:
name=value pairs, sorted, comma-separated ("" for none). */}}
{{- define "watchdog.alertLabels" -}}
{{- $labels := .Values.alerts.extraLabels | default dict -}}
{{- $pairs := list -}}
{{- range $k := keys $labels | sortAlpha -}}
{{- $pairs = append $pairs (printf "%s=%v" $k (get $labels $k)) -}}
{{- end -}}
{{- join "," $pairs -}}
{{- end -}}

{{/* Consistency checks the schema cannot express (it sees one value at a time). */}}
{{- define "watchdog.validate" -}}
{{- $v := .Values -}}
{{- /* Kubernetes >= 1.30 (CronJob timeZone, GA ValidatingAdmissionPolicy). v1.20.0 is
Helm's offline default (`helm template` without --kube-version), not a cluster: the API
server refuses the policy there anyway. -0 admits managed clusters' suffixes. */ -}}
{{- $kv := .Capabilities.KubeVersion.Version -}}
{{- if and (ne $kv "v1.20.0") (semverCompare "<1.30.0-0" $kv) -}}
{{- fail (printf "kubeVersion: the chart needs Kubernetes >= 1.30 (CronJob timeZone, ValidatingAdmissionPolicy v1); this cluster is %s" $kv) -}}
{{- end -}}
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
{{- /* A run must end before the next is due, whatever the schedule's spelling
(five stars run every minute, as a step of 1 does): the shortest gap between two runs. */ -}}
{{- $interval := include "watchdog.cronInterval" $v.cronjob.schedule | int64 -}}
{{- if ge $deadline $interval -}}
{{- fail (printf "cronjob.activeDeadlineSeconds (%d) must be shorter than the schedule's interval (%q runs as often as every %ds): with concurrencyPolicy Forbid a longer run makes the next one skip" $deadline $v.cronjob.schedule $interval) -}}
{{- end -}}
{{- end -}}
{{- if and ($v.caBundle | default dict).configMap ($v.caBundle | default dict).secret -}}
{{- fail "caBundle: set configMap or secret, not both" -}}
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
  (list "LEASE" $v.deployment.leaderElection.lease)
  (list "KEY_SECRET" (include "watchdog.keySecret" .))
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
  (list "SCHEDULER_GRPC_PORT" (int64 $v.scheduler.grpcPort))
  (list "DISCOVERY_PROBE" $v.probe.mode)
  (list "PROBE_WINDOW" $v.probe.window)
  (list "PROBE_ENDPOINTSLICE" $v.probe.endpointSlice)
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
  (list "ALERT_LABELS" (include "watchdog.alertLabels" .))
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
{{- /* This pod: the pass Lease's holder; with probe.mode canary the canary's address and owner too. */}}
{{- $fields := dict "POD_NAME" "metadata.name" }}
{{- if eq $v.probe.mode "canary" }}
{{- $fields = merge $fields (dict "PROBE_ADDRESS" "status.podIP" "POD_UID" "metadata.uid") }}
{{- end }}
{{- range $env, $field := $fields }}
- name: WATCHDOG_{{ $env }}
  valueFrom:
    fieldRef:
      fieldPath: {{ $field }}
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
{{- $ca := .Values.caBundle | default dict }}
{{- if or $ca.configMap $ca.secret .Values.extraVolumes }}
volumes:
  {{- with $ca.configMap }}
  - name: ca-bundle
    configMap:
      name: {{ . }}
  {{- end }}
  {{- with $ca.secret }}
  - name: ca-bundle
    secret:
      secretName: {{ . }}
  {{- end }}
  {{- with .Values.extraVolumes }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* watchdog.containerExtras: what every watchdog container (workload and helm test
hook) adds to its environment and mounts for caBundle and extraVolumeMounts. The CA
bundle's directory joins Go's system roots through SSL_CERT_DIR (the image's public
CAs stay trusted): every TLS connection to a receiver, the Pushgateway or a proxy
trusts it; the API server's CA is the ServiceAccount's own, unaffected. */}}
{{- define "watchdog.caEnv" -}}
{{- $ca := .Values.caBundle | default dict }}
{{- if or $ca.configMap $ca.secret }}
- name: SSL_CERT_DIR
  value: /etc/watchdog/ca
{{- end }}
{{- end -}}

{{- define "watchdog.volumeMounts" -}}
{{- $ca := .Values.caBundle | default dict }}
{{- if or $ca.configMap $ca.secret .Values.extraVolumeMounts }}
volumeMounts:
  {{- if or $ca.configMap $ca.secret }}
  - name: ca-bundle
    mountPath: /etc/watchdog/ca
    readOnly: true
  {{- end }}
  {{- with .Values.extraVolumeMounts }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
{{- end }}
{{- end -}}

{{/* Pod annotations. checksum/secret rolls the Deployment's pods when the Secret
changes (a running process read it at start); the CronJob needs none: each Job's pod
reads the Secret when it starts. The digest is salted with the watchdog's key (lookup),
so that anyone who can read pods cannot test password guesses against it offline;
with no key to read (helm template, the first install) there is no checksum. */}}
{{- define "watchdog.podAnnotations" -}}
{{- $ann := deepCopy (default dict .Values.podAnnotations) -}}
{{- if and (include "watchdog.createSecret" .) (eq .Values.mode "deployment") -}}
{{- $salt := include "watchdog.legacyKey" . -}}
{{- with lookup "v1" "Secret" (include "watchdog.watchNamespace" .) (include "watchdog.keySecret" .) -}}
{{- $salt = print $salt (get (default dict .data) "key" | b64dec) -}}
{{- end -}}
{{- if $salt -}}
{{- $_ := set $ann "checksum/secret" (print $salt (include (print $.Template.BasePath "/secret.yaml") .) | sha256sum) -}}
{{- end -}}
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
