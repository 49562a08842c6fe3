{{/* The admission policy's and the network policy's helpers, and the value checks
that keep every values set the chart accepts one the binary accepts (test/chart
TestValuesContract runs the binary with --validate-only on each). */}}

{{/* watchdog.selectorCEL turns scheduler.selector into a CEL expression over the map
`variables.labels`. It understands the label selector syntax the watchdog uses
(k=v, k==v, k!=v, k in (a,b), k notin (a,b), k, !k, joined by commas) and fails the
render on anything else, so the policy can never enforce something other than what
the watchdog selects. Keys and values are restricted to label characters, so they
need no escaping inside CEL's single quotes. */}}
{{- define "watchdog.selectorCEL" -}}
{{- $sel := .Values.scheduler.selector -}}
{{- $key := "(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?" -}}
{{- $val := "(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?" -}}
{{- $eqRe := printf "^\\s*(%s)\\s*(==|=|!=)\\s*(%s)\\s*$" $key $val -}}
{{- $setVal := "[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?" -}}
{{- $setRe := printf "^\\s*(%s)\\s+(in|notin)\\s*\\(\\s*(%s(?:\\s*,\\s*%s)*)\\s*\\)\\s*$" $key $setVal $setVal -}}
{{- $existsRe := printf "^\\s*(!?)\\s*(%s)\\s*$" $key -}}
{{- /* Terms are separated by the commas outside parentheses. */ -}}
{{- $terms := regexFindAll "[^,()]+(\\([^()]*\\)[^,()]*)?" $sel -1 -}}
{{- if or (not $terms) (ne (join "," $terms) $sel) -}}
{{- fail (printf "scheduler.selector %q is not a label selector the chart understands (k=v, k!=v, k in (a,b), k notin (a,b), k, !k, joined by commas)" $sel) -}}
{{- end -}}
{{- $out := list -}}
{{- range $t := $terms -}}
{{- if regexMatch $eqRe $t -}}
{{- $k := regexReplaceAll $eqRe $t "${1}" -}}
{{- $op := regexReplaceAll $eqRe $t "${2}" -}}
{{- $v := regexReplaceAll $eqRe $t "${3}" -}}
{{- if eq $op "!=" -}}
{{- $out = append $out (printf "(!('%s' in variables.labels) || variables.labels['%s'] != '%s')" $k $k $v) -}}
{{- else -}}
{{- $out = append $out (printf "('%s' in variables.labels && variables.labels['%s'] == '%s')" $k $k $v) -}}
{{- end -}}
{{- else if regexMatch $setRe $t -}}
{{- $k := regexReplaceAll $setRe $t "${1}" -}}
{{- $op := regexReplaceAll $setRe $t "${2}" -}}
{{- $vals := list -}}
{{- range $v := splitList "," (regexReplaceAll $setRe $t "${3}") -}}
{{- $vals = append $vals (printf "'%s'" (trim $v)) -}}
{{- end -}}
{{- if eq $op "notin" -}}
{{- $out = append $out (printf "(!('%s' in variables.labels) || !(variables.labels['%s'] in [%s]))" $k $k (join ", " $vals)) -}}
{{- else -}}
{{- $out = append $out (printf "('%s' in variables.labels && variables.labels['%s'] in [%s])" $k $k (join ", " $vals)) -}}
{{- end -}}
{{- else if regexMatch $existsRe $t -}}
{{- $k := regexReplaceAll $existsRe $t "${2}" -}}
{{- if eq (regexReplaceAll $existsRe $t "${1}") "!" -}}
{{- $out = append $out (printf "!('%s' in variables.labels)" $k) -}}
{{- else -}}
{{- $out = append $out (printf "('%s' in variables.labels)" $k) -}}
{{- end -}}
{{- else -}}
{{- fail (printf "scheduler.selector %q: %q is not a label selector term the chart understands (k=v, k!=v, k in (a,b), k notin (a,b), k, !k)" $sel (trim $t)) -}}
{{- end -}}
{{- end -}}
{{- join " && " $out -}}
{{- end -}}

{{/* True ("true") when the watchdog may restart at all. */}}
{{- define "watchdog.restarts" -}}
{{- if gt (int .Values.restart.maxRestarts) 0 -}}true{{- end -}}
{{- end -}}

{{/* watchdog.millis: a Go duration in milliseconds (a float: the schema's pattern
allows values beyond int64), for checks finer than watchdog.seconds. */}}
{{- define "watchdog.millis" -}}
{{- $total := 0.0 -}}
{{- $units := dict "ns" 0.000001 "us" 0.001 "µs" 0.001 "ms" 1.0 "s" 1000.0 "m" 60000.0 "h" 3600000.0 -}}
{{- range $part := regexFindAll "[0-9]+(\\.[0-9]+)?(ns|us|µs|ms|s|m|h)" (toString .) -1 -}}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $part -}}
{{- $total = addf $total (mulf (float64 $num) (get $units (trimPrefix $num $part))) -}}
{{- end -}}
{{- $total -}}
{{- end -}}

{{/* Checks of single values that the schema cannot express but the binary refuses.
Each one was found by TestValuesContract: the chart accepted the value and every run
of the watchdog exited 2. */}}
{{- define "watchdog.validateContract" -}}
{{- $v := .Values -}}
{{- /* Parses the selector (fails the render when the watchdog could not). */ -}}
{{- $_ := include "watchdog.selectorCEL" . -}}
{{- /* A Go duration holds at most 2562047h (292 years); the pattern allows more digits. */ -}}
{{- range $name, $d := dict "scheduler.scrapeTimeout" $v.scheduler.scrapeTimeout "decision.startupGrace" $v.decision.startupGrace "decision.wedgedFor" $v.decision.wedgedFor "decision.confirmWindow" $v.decision.confirmWindow "decision.sampleInterval" $v.decision.sampleInterval "decision.maxWatchAge" $v.decision.maxWatchAge "restart.window" $v.restart.window "run.timeout" $v.run.timeout "run.apiTimeout" $v.run.apiTimeout "alerts.realertInterval" $v.alerts.realertInterval "alerts.timeout" $v.alerts.timeout "deployment.interval" $v.deployment.interval "alerts.alertmanagerAlertTTL" $v.alerts.alertmanagerAlertTTL "restart.backoff" $v.restart.backoff "restart.backoffMax" $v.restart.backoffMax -}}
{{- if gt (include "watchdog.millis" $d | float64) 9223372036854.0 -}}
{{- fail (printf "%s (%s) is longer than a Go duration can be (2562047h)" $name $d) -}}
{{- end -}}
{{- end -}}
{{- /* The restart history keeps a week (state.MaxHistoryAge): a longer window would
silently count fewer restarts than configured. */ -}}
{{- if gt (include "watchdog.millis" $v.restart.window | float64) 604800000.0 -}}
{{- fail (printf "restart.window (%s) can be at most 168h: the state keeps a week of restart history" $v.restart.window) -}}
{{- end -}}
{{- if and (eq $v.mode "deployment") (lt (include "watchdog.millis" $v.deployment.interval | float64) 1000.0) -}}
{{- fail (printf "deployment.interval (%s) must be at least 1s" $v.deployment.interval) -}}
{{- end -}}
{{- /* Alertmanager (pkg/cli AlertmanagerOptions.Validate and checkRunInterval). */ -}}
{{- $a := $v.alerts -}}
{{- $ttl := include "watchdog.millis" $a.alertmanagerAlertTTL | float64 -}}
{{- if lt $ttl 1000.0 -}}
{{- fail (printf "alerts.alertmanagerAlertTTL (%s) must be at least 1s" $a.alertmanagerAlertTTL) -}}
{{- end -}}
{{- if and $a.alertmanagerURLs (eq $v.mode "deployment") (le $ttl (include "watchdog.millis" $v.deployment.interval | float64)) -}}
{{- fail (printf "alerts.alertmanagerAlertTTL (%s) must be longer than deployment.interval (%s), or open alerts resolve between passes" $a.alertmanagerAlertTTL $v.deployment.interval) -}}
{{- end -}}
{{- $creds := or $a.alertmanagerUsername $a.alertmanagerPassword $a.alertmanagerBearerToken -}}
{{- if and $creds (not $a.alertmanagerURLs) -}}
{{- fail "alerts.alertmanagerUsername, alertmanagerPassword or alertmanagerBearerToken is set but alerts.alertmanagerURLs is not" -}}
{{- end -}}
{{- if and $a.alertmanagerBearerToken (or $a.alertmanagerUsername $a.alertmanagerPassword) -}}
{{- fail "set either alerts.alertmanagerBearerToken or alerts.alertmanagerUsername/alertmanagerPassword, not both" -}}
{{- end -}}
{{- if and $a.alertmanagerPassword (not $a.alertmanagerUsername) -}}
{{- fail "alerts.alertmanagerPassword is set but alerts.alertmanagerUsername is not" -}}
{{- end -}}
{{- range $u := $a.alertmanagerURLs -}}
{{- $host := regexReplaceAll "^https?://(?:[^@/]*@)?(\\[[^\\]]*\\]|[^:/]*).*$" $u "${1}" -}}
{{- $loopback := or (eq $host "localhost") (eq $host "[::1]") (hasPrefix "127." $host) -}}
{{- if and (hasPrefix "http://" $u) (or $creds (regexMatch "^http://[^/]*@" $u)) (not $loopback) -}}
{{- fail "alerts.alertmanagerURLs: credentials over plain http are accepted only for loopback addresses; use https" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* watchdog.selectorLabelSelector: scheduler.selector as a LabelSelector (YAML, only
matchExpressions), for the NetworkPolicy's podSelector. Same parser as
watchdog.selectorCEL; k!=v and k notin (..) match pods without the key, as NotIn does. */}}
{{- define "watchdog.selectorLabelSelector" -}}
{{- $_ := include "watchdog.selectorCEL" . -}}
{{- $sel := .Values.scheduler.selector -}}
{{- $key := "(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?" -}}
{{- $val := "(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?" -}}
{{- $eqRe := printf "^\\s*(%s)\\s*(==|=|!=)\\s*(%s)\\s*$" $key $val -}}
{{- $setVal := "[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?" -}}
{{- $setRe := printf "^\\s*(%s)\\s+(in|notin)\\s*\\(\\s*(%s(?:\\s*,\\s*%s)*)\\s*\\)\\s*$" $key $setVal $setVal -}}
{{- $existsRe := printf "^\\s*(!?)\\s*(%s)\\s*$" $key -}}
{{- $exprs := list -}}
{{- range $t := regexFindAll "[^,()]+(\\([^()]*\\)[^,()]*)?" $sel -1 -}}
{{- if regexMatch $eqRe $t -}}
{{- $op := ternary "NotIn" "In" (eq (regexReplaceAll $eqRe $t "${2}") "!=") -}}
{{- $exprs = append $exprs (dict "key" (regexReplaceAll $eqRe $t "${1}") "operator" $op "values" (list (regexReplaceAll $eqRe $t "${3}"))) -}}
{{- else if regexMatch $setRe $t -}}
{{- $op := ternary "NotIn" "In" (eq (regexReplaceAll $setRe $t "${2}") "notin") -}}
{{- $vals := list -}}
{{- range $v := splitList "," (regexReplaceAll $setRe $t "${3}") -}}
{{- $vals = append $vals (trim $v) -}}
{{- end -}}
{{- $exprs = append $exprs (dict "key" (regexReplaceAll $setRe $t "${1}") "operator" $op "values" $vals) -}}
{{- else -}}
{{- $op := ternary "DoesNotExist" "Exists" (eq (regexReplaceAll $existsRe $t "${1}") "!") -}}
{{- $exprs = append $exprs (dict "key" (regexReplaceAll $existsRe $t "${2}") "operator" $op) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "matchExpressions" $exprs) -}}
{{- end -}}
