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
{{- range $name, $d := dict "scheduler.scrapeTimeout" $v.scheduler.scrapeTimeout "decision.startupGrace" $v.decision.startupGrace "decision.wedgedFor" $v.decision.wedgedFor "decision.confirmWindow" $v.decision.confirmWindow "decision.sampleInterval" $v.decision.sampleInterval "decision.maxWatchAge" $v.decision.maxWatchAge "restart.window" $v.restart.window "run.timeout" $v.run.timeout "run.apiTimeout" $v.run.apiTimeout "alerts.realertInterval" $v.alerts.realertInterval "alerts.timeout" $v.alerts.timeout "deployment.interval" $v.deployment.interval "alerts.alertmanagerAlertTTL" $v.alerts.alertmanagerAlertTTL "restart.backoff" $v.restart.backoff "restart.backoffMax" $v.restart.backoffMax "probe.window" $v.probe.window -}}
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
{{- if and $v.restart.holdOnAlerts (not $a.alertmanagerURLs) (not $a.existingSecret) -}}
{{- fail "restart.holdOnAlerts needs alerts.alertmanagerURLs: the firing alerts are read from there" -}}
{{- end -}}
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

{{/* watchdog.ipBits: the address of an IPv4 or IPv6 CIDR as a string of bits (32 or
128 of them), so that containment is a prefix test (watchdog.receiverBlocks). */}}
{{- define "watchdog.ipBits" -}}
{{- $addr := first (splitList "/" .) | lower -}}
{{- if contains ":" $addr -}}
{{- if contains "." $addr -}}
{{- fail (printf "networkPolicy: %q: write IPv6 addresses in hex, without an embedded IPv4 address" .) -}}
{{- end -}}
{{- $halves := splitList "::" $addr -}}
{{- $head := list -}}
{{- $tail := list -}}
{{- with first $halves }}{{ $head = splitList ":" . }}{{ end -}}
{{- if gt (len $halves) 1 }}{{ with last $halves }}{{ $tail = splitList ":" . }}{{ end }}{{ end -}}
{{- $groups := $head -}}
{{- if gt (len $halves) 1 -}}
{{- range until (int (sub 8 (add (len $head) (len $tail)))) }}{{ $groups = append $groups "0" }}{{ end -}}
{{- end -}}
{{- $groups = concat $groups $tail -}}
{{- $hex := dict "0" "0000" "1" "0001" "2" "0010" "3" "0011" "4" "0100" "5" "0101" "6" "0110" "7" "0111" "8" "1000" "9" "1001" "a" "1010" "b" "1011" "c" "1100" "d" "1101" "e" "1110" "f" "1111" -}}
{{- $bits := "" -}}
{{- range $g := $groups -}}
{{- range $d := splitList "" (trunc -4 (printf "0000%s" $g)) -}}
{{- $bits = printf "%s%s" $bits (get $hex $d) -}}
{{- end -}}
{{- end -}}
{{- if ne (len $bits) 128 -}}
{{- fail (printf "networkPolicy: %q is not an IPv6 CIDR the chart can read" .) -}}
{{- end -}}
{{- $bits -}}
{{- else -}}
{{- range $o := splitList "." $addr -}}
{{- $n := atoi $o -}}
{{- range $bit := list 128 64 32 16 8 4 2 1 -}}
{{- if ge $n $bit }}1{{ $n = sub $n $bit }}{{ else }}0{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* watchdog.receiverBlocks: the ipBlocks of the alert receivers' rule, as YAML. The API
server requires each `except` to be a strict subset of its block's `cidr`, so each
cidr gets only the excepts inside it: a 10.0.0.0/8 under ::/0 would make `helm
install` fail. An except inside no cidr is a mistake and fails the render. */}}
{{- define "watchdog.receiverBlocks" -}}
{{- $r := .Values.networkPolicy.alertReceivers -}}
{{- $blocks := list -}}
{{- $used := dict -}}
{{- range $cidr := $r.cidrs -}}
{{- $bits := include "watchdog.ipBits" $cidr -}}
{{- $len := int (last (splitList "/" $cidr)) -}}
{{- $except := list -}}
{{- range $e := $r.except -}}
{{- $ebits := include "watchdog.ipBits" $e -}}
{{- if and (eq (len $ebits) (len $bits)) (gt (int (last (splitList "/" $e))) $len) (hasPrefix (trunc $len $bits) $ebits) -}}
{{- $except = append $except $e -}}
{{- $_ := set $used $e true -}}
{{- end -}}
{{- end -}}
{{- $block := dict "cidr" $cidr -}}
{{- with $except }}{{ $_ := set $block "except" . }}{{ end -}}
{{- $blocks = append $blocks (dict "ipBlock" $block) -}}
{{- end -}}
{{- range $e := $r.except -}}
{{- if not (hasKey $used $e) -}}
{{- fail (printf "networkPolicy.alertReceivers.except %s is inside none of networkPolicy.alertReceivers.cidrs (each except must be a strict subset of a cidr of its address family)" $e) -}}
{{- end -}}
{{- end -}}
{{- toYaml $blocks -}}
{{- end -}}

{{/* watchdog.receiverPorts: each alert receiver URL the chart knows (not those of
alerts.existingSecret) must reach a port the NetworkPolicy allows: the receivers' rule,
or an extraEgress rule (one without ports allows every port). Otherwise alerts would
be dropped silently by the CNI while `helm install` succeeds, so the render fails. The
message names the value, never the URL (it is a secret). */}}
{{- define "watchdog.receiverPorts" -}}
{{- $np := .Values.networkPolicy -}}
{{- $a := .Values.alerts -}}
{{- $urls := list -}}
{{- range $name := list "slackWebhookURL" "webhookURL" "heartbeatURL" -}}
{{- with get $a $name }}{{ $urls = append $urls (list (printf "alerts.%s" $name) .) }}{{ end -}}
{{- end -}}
{{- range $i, $u := $a.alertmanagerURLs -}}
{{- $urls = append $urls (list (printf "alerts.alertmanagerURLs[%d]" $i) $u) -}}
{{- end -}}
{{- range $entry := $urls -}}
{{- $u := index $entry 1 -}}
{{- $port := regexReplaceAll "^[A-Za-z]+://(?:[^@/]*@)?(?:\\[[^\\]]*\\]|[^:/]*)(?::([0-9]*))?(?:[/?#].*)?$" $u "${1}" -}}
{{- if not $port -}}
{{- $port = ternary "80" "443" (hasPrefix "http://" $u) -}}
{{- end -}}
{{- $port = int $port -}}
{{- $allowed := false -}}
{{- if $np.alertReceivers.cidrs -}}
{{- range $np.alertReceivers.ports }}{{ if eq (int .) $port }}{{ $allowed = true }}{{ end }}{{ end -}}
{{- end -}}
{{- range $rule := $np.extraEgress -}}
{{- if not $rule.ports -}}
{{- $allowed = true -}}
{{- end -}}
{{- range $p := $rule.ports -}}
{{- if and (ne (default "TCP" $p.protocol) "UDP") (ne (default "TCP" $p.protocol) "SCTP") -}}
{{- if or (not (hasKey $p "port")) (kindIs "string" $p.port) -}}
{{- /* No port: every port. A named port is resolved at the destination pod: the chart cannot tell. */ -}}
{{- $allowed = true -}}
{{- else if and $p.endPort (ge $port (int $p.port)) (le $port (int $p.endPort)) -}}
{{- $allowed = true -}}
{{- else if eq (int $p.port) $port -}}
{{- $allowed = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if not $allowed -}}
{{- fail (printf "networkPolicy: %s is on port %d, which the NetworkPolicy does not allow, so its alerts would be dropped: add %d to networkPolicy.alertReceivers.ports, or allow it with a networkPolicy.extraEgress rule (for an in-cluster Alertmanager: its namespace and port)" (index $entry 0) $port $port) -}}
{{- end -}}
{{- end -}}
{{- end -}}
