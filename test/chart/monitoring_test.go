package chart

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/metrics"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// The Prometheus Operator kinds the chart renders, as `helm template --api-versions`
// names them (what .Capabilities.APIVersions.Has checks).
var operatorAPIs = []string{"--api-versions", "monitoring.coreos.com/v1/PodMonitor", "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}

const (
	// mainDocs is the runbook base the promtool tests' expected annotations name
	// (the default, the installed version's docs, is TestRunbookLinksDefaultToTheInstalledVersion's).
	mainDocs = "https://github.com/agentenv/watchdog/blob/main/docs/monitoring.md"
	// Every monitoring object on, in each mode, with the scheduler's rules too.
	monitoringRun  = "mode: deployment\nmonitoring: {podMonitor: {enabled: true}, prometheusRule: {enabled: true, scheduler: {enabled: true}, runbookBaseURL: '" + mainDocs + "'}, dashboard: {enabled: true}}"
	monitoringCron = "monitoring: {podMonitor: {enabled: true}, prometheusRule: {enabled: true, scheduler: {enabled: true}, runbookBaseURL: '" + mainDocs + "'}, dashboard: {enabled: true}}"
	// CronJob runs pushing their metrics: the rules on the watchdog's metrics too.
	monitoringPushed = "monitoring: {pushgateway: {url: 'http://pushgateway.monitoring:9091'}, prometheusRule: {enabled: true, scheduler: {enabled: true}, runbookBaseURL: '" + mainDocs + "'}, dashboard: {enabled: true}}"
)

// tool returns the path in $envVar, else what `hack/<script> --print` prints. A missing
// tool fails the test: make test installs it, and CI must not skip what it cannot run.
func tool(t *testing.T, envVar, script string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	root := filepath.Dir(filepath.Dir(chartDir))
	out, err := exec.Command("bash", filepath.Join(root, "hack", script), "--print").Output()
	if err != nil {
		t.Fatalf("%s is not set and hack/%s --print failed (run hack/%s, or make test): %v", envVar, script, script, err)
	}
	return strings.TrimSpace(string(out))
}

func promtool(t *testing.T) string { return tool(t, "PROMTOOL", "promtool.sh") }

// runPromtool runs promtool and returns its combined output and error.
func runPromtool(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, promtool(t), args...).CombinedOutput()
	return string(out), err
}

// ---- rendering ----------------------------------------------------------------------

// TestMonitoringNeedsTheCRDs: enabled or not, no PodMonitor or PrometheusRule is rendered
// when the cluster does not serve their CRDs (helm template without --api-versions, as
// a cluster without the Prometheus Operator); with them, exactly the enabled ones; the
// dashboard ConfigMap needs no CRD.
func TestMonitoringNeedsTheCRDs(t *testing.T) {
	count := func(r *rendered) string {
		return fmt.Sprintf("PodMonitor=%d PrometheusRule=%d dashboard=%d", len(r.kinds("PodMonitor")), len(r.kinds("PrometheusRule")), len(dashboardConfigMaps(r)))
	}
	cases := []struct {
		name, values string
		apis         []string
		want         string
	}{
		{"defaults, CRDs served", "mode: deployment", operatorAPIs, "PodMonitor=0 PrometheusRule=0 dashboard=0"},
		{"enabled, no CRDs", monitoringRun, nil, "PodMonitor=0 PrometheusRule=0 dashboard=1"},
		{"enabled, CRDs served", monitoringRun, operatorAPIs, "PodMonitor=1 PrometheusRule=1 dashboard=1"},
		// `watchdog check` serves no metrics: no PodMonitor in cronjob mode.
		{"cronjob, CRDs served", monitoringCron, operatorAPIs, "PodMonitor=0 PrometheusRule=1 dashboard=1"},
		{"cronjob, no CRDs", monitoringCron, nil, "PodMonitor=0 PrometheusRule=0 dashboard=1"},
		{"only the PodMonitor CRD", monitoringRun, operatorAPIs[:2], "PodMonitor=1 PrometheusRule=0 dashboard=1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := count(render(t, c.values, c.apis...)); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
		})
	}
}

// TestPodMonitorScrapesTheDeployment: the PodMonitor selects exactly the Deployment's
// pods, on the container port serving /metrics, in the release namespace, and names
// the job as the PrometheusRule's selector expects.
func TestPodMonitorScrapesTheDeployment(t *testing.T) {
	r := render(t, monitoringRun+"\ndeployment: {metricsPort: 9200}", operatorAPIs...)
	pm := r.kinds("PodMonitor")[0]
	d := r.deployment()
	sel, _, _ := unstructured.NestedStringMap(pm.Object, "spec", "selector", "matchLabels")
	if len(sel) == 0 {
		t.Fatal("PodMonitor has no selector")
	}
	for k, v := range sel {
		if d.Spec.Template.Labels[k] != v || d.Spec.Selector.MatchLabels[k] != v {
			t.Errorf("PodMonitor selects %s=%s, which the Deployment's pods (%v) or selector do not carry", k, v, d.Spec.Template.Labels)
		}
	}
	if !equalMaps(sel, d.Spec.Selector.MatchLabels) {
		t.Errorf("PodMonitor selector %v differs from the Deployment's %v (it would scrape other pods or miss these)", sel, d.Spec.Selector.MatchLabels)
	}
	ns, _, _ := unstructured.NestedStringSlice(pm.Object, "spec", "namespaceSelector", "matchNames")
	if !slices.Equal(ns, []string{renderNamespace}) || pm.GetNamespace() != renderNamespace {
		t.Errorf("PodMonitor in %q selects namespaces %v, want the release's %q", pm.GetNamespace(), ns, renderNamespace)
	}
	eps, _, _ := unstructured.NestedSlice(pm.Object, "spec", "podMetricsEndpoints")
	if len(eps) != 1 {
		t.Fatalf("want one endpoint, got %v", eps)
	}
	ep := eps[0].(map[string]any)
	var port int32 = -1
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == ep["port"] {
			port = p.ContainerPort
		}
	}
	if port != 9200 || ep["path"] != "/metrics" || ep["honorLabels"] != true {
		t.Errorf("endpoint %v: port %v is container port %d (want 9200), path /metrics, honorLabels (the verdict's pod label)", ep, ep["port"], port)
	}
	relabel, _ := json.Marshal(ep["relabelings"])
	if !strings.Contains(string(relabel), `"replacement":"`+fullname+`","targetLabel":"job"`) {
		t.Errorf("relabelings %s do not set job=%s, which the rules select", relabel, fullname)
	}
	// Extra labels for the Prometheus's podMonitorSelector.
	r = render(t, "mode: deployment\nmonitoring: {podMonitor: {enabled: true, labels: {release: kps}}}", operatorAPIs...)
	if got := r.kinds("PodMonitor")[0].GetLabels()["release"]; got != "kps" {
		t.Errorf("monitoring.podMonitor.labels not applied: release=%q", got)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestMonitoringValuesRejected: the schema and the templates refuse monitoring values
// Prometheus or the rules could not use.
func TestMonitoringValuesRejected(t *testing.T) {
	cases := []struct{ name, values, want string }{
		{"fractional scrape interval", "monitoring: {podMonitor: {interval: 1.5m}}", "interval"},
		{"duration in days", "monitoring: {prometheusRule: {staleAfter: 1d}}", "staleAfter"},
		{"empty for", "monitoring: {prometheusRule: {wedgedFor: ''}}", "wedgedFor"},
		{"selector with braces", "monitoring: {prometheusRule: {watchdogSelector: '{job=\"x\"}'}}", "watchdogSelector"},
		{"zero failed Jobs", "monitoring: {prometheusRule: {failedJobsPerHour: 0}}", "failedJobsPerHour"},
		{"bad dashboard label", "monitoring: {dashboard: {label: 'grafana dashboard'}}", "label"},
		{"bad dashboard namespace", "monitoring: {dashboard: {namespace: Grafana}}", "namespace"},
		{"unknown key", "monitoring: {probeMonitor: {enabled: true}}", "probeMonitor"},
		{"more failures than Jobs kept", "monitoring: {prometheusRule: {enabled: true, failedJobsPerHour: 4}}", "failedJobsHistoryLimit"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := renderErr(t, c.values, operatorAPIs...)
			if err == nil {
				t.Fatalf("accepted %q:\n%.300s", c.values, out)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error does not name %q: %v", c.want, err)
			}
		})
	}
	// And the monitoring values a user would set are accepted (the cases above can fail).
	render(t, "mode: deployment\nmonitoring: {podMonitor: {enabled: true, interval: 1m, scrapeTimeout: 30s, labels: {release: kps}}, prometheusRule: {enabled: true, staleAfter: 1h30m, wedgedFor: 600s, watchdogSelector: 'job=\"wd\"', labels: {release: kps}, scheduler: {enabled: true, selector: 'namespace=\"s\", job=\"sched\"', wedgedFor: 5m}}, dashboard: {enabled: true, namespace: grafana, label: grafana.com/dashboard, labelValue: agentenv, annotations: {grafana_folder: AgentENV}}}", operatorAPIs...)
}

// ---- the PrometheusRule under promtool -----------------------------------------------

// ruleGroups is a Prometheus rules file: what promtool reads.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

type rule struct {
	Alert       string            `json:"alert"`
	Record      string            `json:"record"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// rulesFile renders the chart with values and writes the PrometheusRule's spec (its
// groups) to dir/rules.yaml, a plain Prometheus rules file.
func rulesFile(t *testing.T, values, dir string) (string, ruleGroups) {
	t.Helper()
	prs := render(t, values, operatorAPIs...).kinds("PrometheusRule")
	if len(prs) != 1 {
		t.Fatalf("want one PrometheusRule, rendered %d", len(prs))
	}
	spec, _, _ := unstructured.NestedMap(prs[0].Object, "spec")
	// JSON is YAML: promtool reads it as a rules file.
	raw, err := json.MarshalIndent(spec, "", "  ")
	must(t, err)
	var groups ruleGroups
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	must(t, dec.Decode(&groups))
	path := filepath.Join(dir, "rules.yaml")
	must(t, os.WriteFile(path, raw, 0o600))
	return path, groups
}

// ruleTests is the part of a promtool test file the coverage check reads.
type ruleTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string           `json:"alertname"`
			ExpAlerts []map[string]any `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestPrometheusRules: the PrometheusRule of each mode, extracted from `helm template`
// into a plain rules file, passes `promtool check rules` and its unit tests
// (testdata/monitoring/*.test.yaml, run by `promtool test rules`); every alert there
// is tested both firing and not firing, carries a severity and the three annotations,
// and its runbook_url points at its section of docs/monitoring.md.
func TestPrometheusRules(t *testing.T) {
	doc := monitoringDoc(t)
	cases := []struct {
		name, values string
		tests        []string
		groups       []string
	}{
		{"deployment", monitoringRun, []string{"run.test.yaml", "metrics.test.yaml", "counters.test.yaml", "scheduler.test.yaml"}, []string{"agentenv-scheduler-watchdog.metrics", "agentenv-scheduler.discovery"}},
		{"cronjob", monitoringCron, []string{"cronjob.test.yaml", "scheduler.test.yaml"}, []string{"agentenv-scheduler-watchdog.cronjob", "agentenv-scheduler.discovery"}},
		{"cronjob with a Pushgateway", monitoringPushed, []string{"metrics.test.yaml", "pushed.test.yaml", "cronjob.test.yaml", "scheduler.test.yaml"}, []string{"agentenv-scheduler-watchdog.metrics", "agentenv-scheduler-watchdog.cronjob", "agentenv-scheduler.discovery"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			rules, groups := rulesFile(t, c.values, dir)
			var names []string
			alerts := map[string]rule{}
			for _, g := range groups.Groups {
				names = append(names, g.Name)
				for _, r := range g.Rules {
					alerts[r.Alert] = r
				}
			}
			if !slices.Equal(names, c.groups) {
				t.Errorf("groups %v, want %v", names, c.groups)
			}
			if out, err := runPromtool(t, "check", "rules", "--lint=all", "--lint-fatal", rules); err != nil {
				t.Fatalf("promtool check rules: %v\n%s", err, out)
			}

			firing, quiet := map[string]bool{}, map[string]bool{}
			for _, name := range c.tests {
				src := filepath.Join(filepath.Dir(filepath.Dir(chartDir)), "test", "chart", "testdata", "monitoring", name)
				raw, err := os.ReadFile(src)
				must(t, err)
				var tests ruleTests
				must(t, utilyaml.Unmarshal(raw, &tests))
				if !slices.Equal(tests.RuleFiles, []string{"rules.yaml"}) {
					t.Fatalf("%s: rule_files must be [rules.yaml] (the file this test extracts), is %v", name, tests.RuleFiles)
				}
				must(t, os.WriteFile(filepath.Join(dir, name), raw, 0o600))
				if out, err := runPromtool(t, "test", "rules", filepath.Join(dir, name)); err != nil {
					t.Errorf("promtool test rules %s: %v\n%s", name, err, out)
				}
				for _, tc := range tests.Tests {
					for _, a := range tc.AlertRuleTest {
						if _, ok := alerts[a.Alertname]; !ok {
							t.Errorf("%s tests %s, which the chart does not render in this mode", name, a.Alertname)
						}
						if len(a.ExpAlerts) > 0 {
							firing[a.Alertname] = true
						} else {
							quiet[a.Alertname] = true
						}
					}
				}
			}
			for name, r := range alerts {
				if !firing[name] || !quiet[name] {
					t.Errorf("%s needs a test case where it fires and one where it does not (fires: %v, quiet: %v)", name, firing[name], quiet[name])
				}
				checkAlertMetadata(t, r, doc)
			}
		})
	}
}

// checkAlertMetadata: a severity the routing knows, the three annotations, a runbook
// anchor that exists in docs/monitoring.md.
func checkAlertMetadata(t *testing.T, r rule, doc string) {
	t.Helper()
	if r.Alert == "" {
		t.Errorf("a rule without an alert name: %+v", r)
		return
	}
	if s := r.Labels["severity"]; s != "critical" && s != "warning" && s != "info" {
		t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, s)
	}
	for _, a := range []string{"summary", "description", "runbook_url"} {
		if strings.TrimSpace(r.Annotations[a]) == "" {
			t.Errorf("%s: no %s annotation", r.Alert, a)
		}
	}
	want := mainDocs + "#" + strings.ToLower(r.Alert)
	if r.Annotations["runbook_url"] != want {
		t.Errorf("%s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want)
	}
	if !regexp.MustCompile(`(?m)^#+ ` + regexp.QuoteMeta(r.Alert) + `$`).MatchString(doc) {
		t.Errorf("docs/monitoring.md has no heading %q (the runbook_url's anchor)", r.Alert)
	}
}

// TestRunbookLinksDefaultToTheInstalledVersion: by default every alert links to its
// section of docs/monitoring.md at the release tag of the chart's appVersion
// (v<appVersion>, docs/versioning.md), whose heading exists in this checkout's
// docs (checkAlertMetadata); monitoring.prometheusRule.runbookBaseURL replaces it.
func TestRunbookLinksDefaultToTheInstalledVersion(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "Chart.yaml"))
	must(t, err)
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	must(t, utilyaml.Unmarshal(raw, &chart))
	if chart.AppVersion == "" {
		t.Fatal("Chart.yaml has no appVersion")
	}
	base := "https://github.com/agentenv/watchdog/blob/v" + chart.AppVersion + "/docs/monitoring.md"
	dir := t.TempDir()
	for values, want := range map[string]string{
		"mode: deployment\nmonitoring: {prometheusRule: {enabled: true, scheduler: {enabled: true}}}":                                   base,
		"monitoring: {pushgateway: {url: 'http://pg:9091'}, prometheusRule: {enabled: true}}":                                           base,
		"mode: deployment\nmonitoring: {prometheusRule: {enabled: true, runbookBaseURL: 'https://wiki.example.com/watchdog/runbook/'}}": "https://wiki.example.com/watchdog/runbook",
	} {
		_, groups := rulesFile(t, values, dir)
		n := 0
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				n++
				if got := r.Annotations["runbook_url"]; got != want+"#"+strings.ToLower(r.Alert) {
					t.Errorf("%s: %s runbook_url %q, want %q", values, r.Alert, got, want+"#"+strings.ToLower(r.Alert))
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no rules", values)
		}
	}
}

// TestPrometheusRuleFollowsValues: the rules use the thresholds and selectors the values
// give, and drop the restart-budget alert when the watchdog may not restart at all.
func TestPrometheusRuleFollowsValues(t *testing.T) {
	dir := t.TempDir()
	_, groups := rulesFile(t, "mode: deployment\nrestart: {maxRestarts: 5, window: 2h}\nmonitoring: {prometheusRule: {enabled: true, staleAfter: 20m, wedgedFor: 7m, watchdogSelector: 'job=\"custom\"'}}", dir)
	alerts := map[string]rule{}
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			alerts[r.Alert] = r
		}
	}
	for name, want := range map[string]string{
		"AgentenvWatchdogPassesStale":        "> 1200",
		"AgentenvWatchdogRestartBudgetSpent": `outcome="done"}[7200s]`,
		"AgentenvWatchdogDown":               `absent(up{job="custom"} == 1)`,
	} {
		if !strings.Contains(alerts[name].Expr, want) {
			t.Errorf("%s: expr %q lacks %q", name, alerts[name].Expr, want)
		}
	}
	if got := alerts["AgentenvWatchdogRestartBudgetSpent"].Expr; !strings.HasSuffix(got, ">= 5") {
		t.Errorf("budget alert does not use restart.maxRestarts: %q", got)
	}
	if got := alerts["AgentenvSchedulerWedgedTooLong"].For; got != "7m" {
		t.Errorf("AgentenvSchedulerWedgedTooLong for %q, want 7m", got)
	}
	if got := alerts["AgentenvWatchdogRestartBudgetSpent"].Expr; strings.Contains(got, "last_pass_timestamp") {
		t.Errorf("deployment mode counts served counters by runs: %q", got)
	}
	// Pushed counters are running totals: increase() on them, with the selector and
	// the window the values give, and nothing read from the runs' timestamps
	// (pushed.test.yaml replays it).
	_, groups = rulesFile(t, "restart: {maxRestarts: 5, window: 2h}\nmonitoring: {pushgateway: {url: 'http://pg:9091'}, prometheusRule: {enabled: true, watchdogSelector: 'job=\"custom\"'}}", dir)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "AgentenvWatchdogRestartBudgetSpent" {
				if want := `sum by (namespace, job) (increase(agentenv_watchdog_restarts_total{job="custom", outcome="done"}[7200s])) >= 5`; r.Expr != want {
					t.Errorf("pushed budget alert: expr %q, want %q", r.Expr, want)
				}
			}
		}
	}
	_, groups = rulesFile(t, "mode: deployment\nrestart: {maxRestarts: 0}\nmonitoring: {prometheusRule: {enabled: true}}", dir)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "AgentenvWatchdogRestartBudgetSpent" {
				t.Error("alert-only configuration (restart.maxRestarts 0) still has a restart budget alert")
			}
		}
	}
	_, groups = rulesFile(t, "monitoring: {prometheusRule: {enabled: true, scheduler: {enabled: true}}}\nscheduler: {namespace: sched-ns}", dir)
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if g.Name == "agentenv-scheduler.discovery" && !strings.Contains(r.Expr, `namespace="sched-ns"`) {
				t.Errorf("%s does not select the scheduler's namespace: %s", r.Alert, r.Expr)
			}
			if g.Name != "agentenv-scheduler.discovery" && strings.Contains(r.Expr, "sched-ns") {
				t.Errorf("%s selects the scheduler's namespace for the watchdog's own Jobs: %s", r.Alert, r.Expr)
			}
		}
	}
}

// ---- the dashboard --------------------------------------------------------------------

func dashboardConfigMaps(r *rendered) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, cm := range r.kinds("ConfigMap") {
		if strings.HasSuffix(cm.GetName(), "-dashboard") {
			out = append(out, cm)
		}
	}
	return out
}

func dashboardFile(t *testing.T) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "files", "dashboard.json"))
	must(t, err)
	return raw
}

// dashboard is the part of a Grafana dashboard the checks read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Definition string          `json:"definition"`
			Datasource *datasourceRef  `json:"datasource"`
			IncludeAll bool            `json:"includeAll"`
			AllValue   string          `json:"allValue"`
		} `json:"list"`
	} `json:"templating"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
}

// TestDashboardWellFormed: files/dashboard.json is a Grafana dashboard whose every query
// panel asks the data source the user picks in a `datasource` variable, with unique ids
// and refIds, on the 24-column grid; and the chart ships it byte for byte, under the
// sidecar label and in the namespace the values give.
func TestDashboardWellFormed(t *testing.T) {
	raw := dashboardFile(t)
	var d dashboard
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	must(t, dec.Decode(&d))
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 30 {
		t.Errorf("uid %q, title %q, schemaVersion %d", d.UID, d.Title, d.SchemaVersion)
	}
	var dsVar bool
	for _, v := range d.Templating.List {
		if v.Name == "datasource" && v.Type == "datasource" && string(v.Query) == `"prometheus"` {
			dsVar = true
		}
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable %s does not query ${datasource}", v.Name)
		}
	}
	if !dsVar {
		t.Error("no `datasource` variable of type datasource for Prometheus")
	}
	checkClusterVariable(t, &d)
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v off the 24-column grid", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d %q has no title or no targets", p.ID, p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not use ${datasource}: %+v", p.Title, p.Datasource)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			queries++
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: target %q without expr or with a missing or repeated refId", p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q target %s does not use ${datasource}", p.Title, tg.RefID)
			}
		}
	}
	if queries < 8 {
		t.Errorf("only %d queries", queries)
	}

	// Shipped as is, where and how the values say.
	r := render(t, "monitoring: {dashboard: {enabled: true, namespace: grafana, label: grafana.com/dashboard, labelValue: agentenv, annotations: {grafana_folder: AgentENV}}}")
	cms := dashboardConfigMaps(r)
	if len(cms) != 1 {
		t.Fatalf("want one dashboard ConfigMap, got %d", len(cms))
	}
	cm := cms[0]
	if cm.GetNamespace() != "grafana" || cm.GetLabels()["grafana.com/dashboard"] != "agentenv" || cm.GetAnnotations()["grafana_folder"] != "AgentENV" {
		t.Errorf("ConfigMap %s/%s labels %v annotations %v", cm.GetNamespace(), cm.GetName(), cm.GetLabels(), cm.GetAnnotations())
	}
	data, _, _ := unstructured.NestedString(cm.Object, "data", "agentenv-scheduler-watchdog.json")
	if data != strings.TrimRight(string(raw), "\n") {
		t.Error("the ConfigMap's dashboard differs from files/dashboard.json")
	}
	cm = dashboardConfigMaps(render(t, "monitoring: {dashboard: {enabled: true}}"))[0]
	if cm.GetNamespace() != renderNamespace || cm.GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("default: ConfigMap in %q with labels %v, want the release namespace and grafana_dashboard=1", cm.GetNamespace(), cm.GetLabels())
	}
}

// checkClusterVariable: a `cluster` variable (one Grafana over the Prometheus of many
// clusters, or a Thanos or Mimir holding them all) whose "All" also matches series
// without a cluster label (a single Prometheus), and every query of the dashboard,
// panels and the variables after it, selects $cluster.
func checkClusterVariable(t *testing.T, d *dashboard) {
	t.Helper()
	seen := false
	for _, v := range d.Templating.List {
		switch {
		case v.Name == "cluster":
			seen = true
			if v.Type != "query" || !v.IncludeAll || v.AllValue != ".*" || !strings.Contains(string(v.Query), ", cluster)") {
				t.Errorf("cluster variable: type %q, includeAll %v, allValue %q, query %s: want label_values(..., cluster) with All = .*", v.Type, v.IncludeAll, v.AllValue, v.Query)
			}
		case v.Type == "query":
			if !seen || !strings.Contains(string(v.Query), `cluster=~\"$cluster\"`) || !strings.Contains(v.Definition, `cluster=~"$cluster"`) {
				t.Errorf("variable %s does not follow the cluster variable: %s", v.Name, v.Query)
			}
		}
	}
	if !seen {
		t.Error("no `cluster` variable")
	}
	sel := regexp.MustCompile(`\{[^}]*\}`)
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, m := range sel.FindAllString(tg.Expr, -1) {
				if !strings.Contains(m, `cluster=~"$cluster"`) {
					t.Errorf("panel %q target %s: selector %s lacks cluster=~\"$cluster\"", p.Title, tg.RefID, m)
				}
			}
		}
	}
}

// ---- metric names ------------------------------------------------------------------------

// exportedMetrics are the series names the project produces or reads: the watchdog's own
// registry (as `watchdog run` serves it, every family filled), the scheduler's series
// the watchdog reads (pkg/scrape), and the series of other exporters that
// docs/monitoring.md lists in its table of outside series.
func exportedMetrics(t *testing.T, doc string) map[string]string {
	t.Helper()
	names := map[string]string{}
	m := metrics.New(metrics.Options{Sinks: []string{"slack"}, Runtime: true})
	n := 3
	m.SetLeader(true)
	m.Observe(&check.Report{
		Targets:  []decide.Target{{Pod: "p", Judged: true, Verdict: state.VerdictWedged, Ready: &n, Expected: &n, ScrapeKind: "timeout"}},
		Restarts: []check.RestartReport{{Pod: "p", Outcome: "done"}},
		Alerts:   []deliver.Delivery{{Event: "wedged", Sink: "slack", OK: true}},
	}, nil, time.Second, time.Now())
	families, err := m.Registry.Gather()
	must(t, err)
	for _, f := range families {
		names[f.GetName()] = "watchdog"
		if f.GetType().String() == "HISTOGRAM" {
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+s] = "watchdog"
			}
		}
	}
	if len(families) < 10 {
		t.Fatalf("only %d watchdog families gathered", len(families))
	}
	names[scrape.ObservedNodesMetric] = "scheduler"
	names[scrape.WatchAgeMetric] = "scheduler"
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		names[scrape.RPCDurationMetric+s] = "scheduler"
	}
	// The table of outside series: lines "| `name` | exporter | ... |".
	section := doc[strings.Index(doc, "## Series from other exporters"):]
	if i := strings.Index(section[3:], "\n## "); i > 0 {
		section = section[:i+3]
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-zA-Z_:][a-zA-Z0-9_:]*)` \\|").FindAllStringSubmatch(section, -1) {
		names[m[1]] = "documented"
	}
	return names
}

// promqlMetricNames returns the metric names an expression selects. A careful
// tokenizer, not a parser (the project does not depend on the Prometheus module):
// string literals, label matchers, ranges, and grouping label lists are removed first;
// what remains is an identifier that is no keyword and not called like a function or
// an aggregation. promtool checks the same expressions' syntax, so the input is valid
// PromQL; TestPromQLMetricNames checks the tokenizer on the constructs used.
func promqlMetricNames(expr string) []string {
	e := regexp.MustCompile(`\$\{?[a-zA-Z_]+\}?`).ReplaceAllString(expr, "5m")
	e = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`+"`[^`]*`").ReplaceAllString(e, `""`)
	e = regexp.MustCompile(`\{[^{}]*\}`).ReplaceAllString(e, "{}")
	e = regexp.MustCompile(`\[[^\]]*\]`).ReplaceAllString(e, "")
	e = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`).ReplaceAllString(e, " ")
	keywords := map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
		"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true, "Inf": true, "NaN": true}
	seen := map[string]bool{}
	var out []string
	for _, loc := range regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`).FindAllStringIndex(e, -1) {
		if loc[0] > 0 && strings.ContainsAny(e[loc[0]-1:loc[0]], "0123456789.") {
			continue // a number's exponent or a duration's unit
		}
		name := e[loc[0]:loc[1]]
		if keywords[name] || strings.HasPrefix(strings.TrimLeft(e[loc[1]:], " \t\n"), "(") {
			continue
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// TestPromQLMetricNames: the tokenizer on the constructs the rules and panels use.
func TestPromQLMetricNames(t *testing.T) {
	cases := map[string]string{
		`absent(up{namespace="a", job="b"} == 1)`:                                                                  "up",
		`time() - max by (namespace, job) (x_seconds{job="j"}) > 900`:                                              "x_seconds",
		`sum by (namespace, job) (increase(a_total{o="done"}[3600s]) or (a_total unless a_total offset 15m)) >= 3`: "a_total",
		`count by (namespace, owner_name) (kube_job_owner{k="CronJob"} and on (namespace, job_name) (kube_job_status_failed > 0) and on (namespace, job_name) (time() - kube_job_created < 3600)) >= 2`: "kube_job_created kube_job_owner kube_job_status_failed",
		`histogram_quantile(0.9, sum by (le) (rate(d_bucket{namespace=~"$namespace"}[$__rate_interval])))`:                                                                                              "d_bucket",
		`sum(x{a="by (y) and z{"}) by (le) * 1e3 + sum without(b) (y:rec)`:                                                                                                                              "x y:rec",
		`max by (pod) (m{s="ready"}) == 0 and on (namespace, pod) sum by (namespace, pod) (rate(n_count{rpc="Heartbeat"}[5m])) > 0`:                                                                     "m n_count",
		`a * on (x) group_left (owner_name) b`: "a b",
	}
	for expr, want := range cases {
		if got := strings.Join(promqlMetricNames(expr), " "); got != want {
			t.Errorf("%s\n got %q\nwant %q", expr, got, want)
		}
	}
}

// TestMonitoringMetricsExist: every query of the rules (both modes, scheduler group on)
// and of the dashboard selects only series the project exports or reads, or that
// docs/monitoring.md lists with their exporter; and the dashboard's queries are valid
// PromQL (promtool checks them as recording rules, Grafana's variables filled in).
func TestMonitoringMetricsExist(t *testing.T) {
	doc := monitoringDoc(t)
	known := exportedMetrics(t, doc)
	used := map[string]bool{}
	checkExpr := func(where, expr string) {
		names := promqlMetricNames(expr)
		if len(names) == 0 {
			t.Errorf("%s: no metric found in %q", where, expr)
		}
		for _, n := range names {
			used[n] = true
			if known[n] == "" {
				t.Errorf("%s selects %s, which the project neither exports nor documents:\n%s", where, n, expr)
			}
		}
	}
	dir := t.TempDir()
	for _, values := range []string{monitoringRun, monitoringCron} {
		_, groups := rulesFile(t, values, dir)
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				checkExpr("rule "+r.Alert, r.Expr)
			}
		}
	}

	var d dashboard
	must(t, json.Unmarshal(dashboardFile(t), &d))
	fill := strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$namespace", ".*", "$cronjob", ".*")
	var recording []map[string]string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			checkExpr(fmt.Sprintf("panel %q %s", p.Title, tg.RefID), tg.Expr)
			recording = append(recording, map[string]string{"record": fmt.Sprintf("panel_%d_%s", p.ID, tg.RefID), "expr": fill.Replace(tg.Expr)})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		// label_values(<series selector>, label): the names are in the selector.
		for _, n := range regexp.MustCompile(`\b(agentenv_[a-z_]+|kube_[a-z_]+)\b`).FindAllString(string(v.Query), -1) {
			used[n] = true
			if known[n] == "" {
				t.Errorf("variable %s queries %s, which the project neither exports nor documents", v.Name, n)
			}
		}
	}
	raw, err := json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": recording}}})
	must(t, err)
	path := filepath.Join(dir, "dashboard-queries.yaml")
	must(t, os.WriteFile(path, raw, 0o600))
	if out, err := runPromtool(t, "check", "rules", path); err != nil {
		t.Errorf("dashboard queries are not valid PromQL: %v\n%s", err, out)
	}

	// Every outside series the docs list is one the chart uses (the list stays honest).
	for n, src := range known {
		if src == "documented" && !used[n] {
			t.Errorf("docs/monitoring.md lists %s, which no rule or panel uses", n)
		}
	}
}

// TestMonitoringDocsDescribePanels: docs/monitoring.md describes each dashboard panel.
func TestMonitoringDocsDescribePanels(t *testing.T) {
	doc := monitoringDoc(t)
	var d dashboard
	must(t, json.Unmarshal(dashboardFile(t), &d))
	for _, p := range d.Panels {
		if p.Type != "row" && !strings.Contains(doc, "**"+p.Title+"**") {
			t.Errorf("docs/monitoring.md does not describe the panel **%s**", p.Title)
		}
	}
}

func monitoringDoc(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(chartDir)), "docs", "monitoring.md"))
	must(t, err)
	return string(raw)
}

// ---- on the API server ----------------------------------------------------------------

var (
	podMonitorGVR     = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "podmonitors"}
	prometheusRuleGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}
)

// TestMonitoringOnTheAPIServer installs the Prometheus Operator's own CRDs (from its Go
// module, hack/prometheus-operator-crds.sh) into the test API server. `helm install`
// then finds them by discovery and creates the PodMonitor and PrometheusRule, which the
// API server validates against the CRDs' schemas; a server-side dry run with strict
// field validation also refuses fields the CRDs do not know. A broken object is refused
// (the check can fail).
func TestMonitoringOnTheAPIServer(t *testing.T) {
	crds := tool(t, "PROMETHEUS_OPERATOR_CRDS", "prometheus-operator-crds.sh")
	installed, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{crds}, ErrorIfPathMissing: true})
	must(t, err)
	if len(installed) != 2 {
		t.Fatalf("installed %d CRDs from %s, want PodMonitor and PrometheusRule", len(installed), crds)
	}
	dyn, err := dynamic.NewForConfig(env.Config)
	must(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, mode := range []struct{ name, values string }{{"deployment", monitoringRun}, {"cronjob", monitoringCron}} {
		t.Run(mode.name, func(t *testing.T) {
			ns, err := env.CreateNamespace(ctx, "mon-"+mode.name)
			must(t, err)
			// helm install: capabilities from the API server's discovery.
			rel, _ := installChart(t, ns, release, mode.values)
			defer rel.uninstall()
			_, pmErr := dyn.Resource(podMonitorGVR).Namespace(ns).Get(ctx, fullname, metav1.GetOptions{})
			if mode.name == "deployment" && pmErr != nil {
				t.Errorf("PodMonitor not installed: %v", pmErr)
			}
			if mode.name == "cronjob" && !apierrors.IsNotFound(pmErr) {
				t.Errorf("cronjob mode: want no PodMonitor, got %v", pmErr)
			}
			if _, err := dyn.Resource(prometheusRuleGVR).Namespace(ns).Get(ctx, fullname, metav1.GetOptions{}); err != nil {
				t.Errorf("PrometheusRule not installed: %v", err)
			}

			// Strict server-side dry run of the rendered objects.
			out := mustHelm(t, append([]string{"template", release, chartDir, "--namespace", ns, "--kube-version", renderKubeVersion, "-f", valuesFile(t, mode.values)}, operatorAPIs...)...)
			for _, o := range parse(t, out).objs {
				gvr := map[string]schema.GroupVersionResource{"PodMonitor": podMonitorGVR, "PrometheusRule": prometheusRuleGVR}[o.GetKind()]
				if gvr.Resource == "" {
					continue
				}
				o.SetName(o.GetName() + "-dry")
				if err := dryRunCreate(ctx, dyn, gvr, o); err != nil {
					t.Errorf("%s refused: %v", o.GetKind(), err)
				}
				// The check can fail: an unknown field and a malformed duration are refused.
				bad := o.DeepCopy()
				must(t, unstructured.SetNestedField(bad.Object, "x", "spec", "unknownField"))
				if err := dryRunCreate(ctx, dyn, gvr, bad); err == nil {
					t.Errorf("%s with spec.unknownField accepted: strict validation is not in force", o.GetKind())
				}
				if o.GetKind() == "PrometheusRule" {
					bad = o.DeepCopy()
					groups, _, _ := unstructured.NestedSlice(bad.Object, "spec", "groups")
					groups[0].(map[string]any)["rules"].([]any)[0].(map[string]any)["for"] = "10 minutes"
					must(t, unstructured.SetNestedSlice(bad.Object, groups, "spec", "groups"))
					if err := dryRunCreate(ctx, dyn, gvr, bad); err == nil {
						t.Error("a PrometheusRule with for: \"10 minutes\" accepted")
					}
				}
			}
		})
	}
}

func dryRunCreate(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, o *unstructured.Unstructured) error {
	_, err := dyn.Resource(gvr).Namespace(o.GetNamespace()).Create(ctx, o, metav1.CreateOptions{
		DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict",
	})
	return err
}
