package chart

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/deliver"
)

// TestAlertmanagerValues: the Alertmanager URLs and credentials go into the Secret
// (the URLs comma-joined, as --alertmanager-url reads them) and reach the container
// through secretKeyRef; the TTL and generator URL are plain settings.
func TestAlertmanagerValues(t *testing.T) {
	r := render(t, `alerts:
  alertmanagerURLs: ["https://am-0.example.com/AMPATHTOKEN", "https://am-1.example.com"]
  alertmanagerBearerToken: AMBEARERTOKEN
  alertmanagerAlertTTL: 20m
  alertmanagerGeneratorURL: https://grafana.example.com/explore
`)
	var secret corev1.Secret
	r.one("Secret", &secret)
	if got := secret.StringData["alertmanager-url"]; got != "https://am-0.example.com/AMPATHTOKEN,https://am-1.example.com" {
		t.Errorf("Secret alertmanager-url = %q", got)
	}
	if got := secret.StringData["alertmanager-bearer-token"]; got != "AMBEARERTOKEN" {
		t.Errorf("Secret alertmanager-bearer-token = %q", got)
	}
	env := envOf(r.podSpec().Containers[0])
	for flag, key := range map[string]string{"ALERTMANAGER_URL": "alertmanager-url", "ALERTMANAGER_USERNAME": "alertmanager-username",
		"ALERTMANAGER_PASSWORD": "alertmanager-password", "ALERTMANAGER_BEARER_TOKEN": "alertmanager-bearer-token"} {
		e := env["WATCHDOG_"+flag]
		if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Key != key {
			t.Errorf("WATCHDOG_%s = %+v, want secretKeyRef key %s", flag, e, key)
		}
	}
	if e := env["WATCHDOG_ALERTMANAGER_ALERT_TTL"]; e.Value != "20m" {
		t.Errorf("WATCHDOG_ALERTMANAGER_ALERT_TTL = %+v", e)
	}
	if e := env["WATCHDOG_ALERTMANAGER_GENERATOR_URL"]; e.Value != "https://grafana.example.com/explore" {
		t.Errorf("WATCHDOG_ALERTMANAGER_GENERATOR_URL = %+v", e)
	}
	for _, o := range r.objs {
		if o.GetKind() == "Secret" {
			continue
		}
		raw, err := o.MarshalJSON()
		must(t, err)
		for _, tok := range []string{"AMPATHTOKEN", "AMBEARERTOKEN"} {
			if strings.Contains(string(raw), tok) {
				t.Errorf("%s %s carries the secret %s", o.GetKind(), o.GetName(), tok)
			}
		}
	}

	for _, c := range []struct{ values, want string }{
		{"alerts: {alertmanagerURLs: ['am.example.com']}", "alertmanagerURLs"},
		{"alerts: {alertmanagerURLs: ['https://a.example.com,https://b.example.com']}", "alertmanagerURLs"},
		{"alerts: {alertmanagerAlertTTL: 0s}", "alertmanagerAlertTTL"},
		{"alerts: {existingSecret: mine, alertmanagerBearerToken: x}", "not both"},
	} {
		if out, err := renderErr(t, c.values); err == nil || !strings.Contains(out+err.Error(), c.want) {
			t.Errorf("%s: rendered (err %v), want a failure naming %s:\n%s", c.values, err, c.want, out)
		}
	}
}

// TestRuleAlertnamesNotPushed: no alert of the chart's PrometheusRule (either mode,
// the scheduler's rules too) has the alertname of an alert the watchdog pushes: with
// both on, one name would stand for two meanings and label sets, and page twice.
func TestRuleAlertnamesNotPushed(t *testing.T) {
	for _, values := range []string{monitoringRun, monitoringCron} {
		_, groups := rulesFile(t, values, t.TempDir())
		for _, g := range groups.Groups {
			for _, r := range g.Rules {
				for _, e := range alert.Events {
					if r.Alert != "" && r.Alert == e.Alertname {
						t.Errorf("rule %s (group %s) has the alertname the watchdog pushes for %s", r.Alert, g.Name, e.Name)
					}
				}
			}
		}
	}
}

// TestRoutingExampleOnePagePerProblem runs the routing example of docs/alerts.md, as written
// (only receivers and the root group_wait added), in a real Alertmanager: for each
// problem the watchdog pushes its alert and the chart's rules fire for the same pod,
// with the labels the rendered PrometheusRule gives them; exactly one notification
// goes out, the watchdog's, and Alertmanager marks every rule alert inhibited. With
// the watchdog silent (gone, or unable to reach Alertmanager), the rules page, once.
func TestRoutingExampleOnePagePerProblem(t *testing.T) {
	cfg := routingExample(t)
	rcv := newNotificationReceiver(t)
	receivers := []any{}
	for _, name := range receiverNames(cfg["route"]) {
		receivers = append(receivers, map[string]any{"name": name, "webhook_configs": []any{map[string]any{"url": rcv.URL + "/" + name, "send_resolved": false}}})
	}
	cfg["receivers"] = receivers
	cfg["route"].(map[string]any)["group_wait"] = "1s" // timing only: the example leaves the default, 30s
	raw, err := json.Marshal(cfg)
	must(t, err)
	am, err := testenv.StartAlertmanager(tool(t, testenv.EnvAlertmanager, "alertmanager.sh"), string(raw), "", t.TempDir())
	must(t, err)
	t.Cleanup(am.Stop)
	sink, err := deliver.NewAlertmanager([]string{am.Base}, 5*time.Second, 1, 10*time.Second)
	must(t, err)

	// The rules as rendered, scheduler in its own namespace.
	rules := map[string]rule{}
	_, groups := rulesFile(t, monitoringRun+"\nscheduler: {namespace: agentenv-sched}", t.TempDir())
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			rules[r.Alert] = r
		}
	}
	wedgeRules := []string{"AgentenvSchedulerWedgedTooLong", "AgentenvSchedulerDiscoveryWedged"}
	degradedRules := []string{"AgentenvSchedulerDegradedTooLong", "AgentenvSchedulerHeartbeatsRejected"}
	cases := []struct {
		event    string
		rules    []string
		pushed   bool
		want     string // the one alertname notified
		receiver string // the example's receiver for it
	}{
		{alert.EventWedged, wedgeRules, true, "AgentenvSchedulerWedged", "oncall-pager"},
		{alert.EventDegraded, degradedRules, true, "AgentenvSchedulerDegraded", "team-chat"},
		{alert.EventBlind, []string{"AgentenvWatchdogBlindTooLong"}, true, "AgentenvWatchdogBlind", "team-chat"},
		{alert.EventWedged, wedgeRules, false, "AgentenvSchedulerWedgedTooLong", "oncall-pager"},
		{alert.EventDegraded, degradedRules, false, "AgentenvSchedulerDegradedTooLong", "team-chat"},
	}
	for i, c := range cases {
		name := fmt.Sprintf("%s/pushed=%v", c.event, c.pushed)
		t.Run(name, func(t *testing.T) {
			// Each case in a cluster of its own: its notifications are its own.
			cluster := fmt.Sprintf("case-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pod := "agentenv-scheduler-7d9c4-x2k8p"
			// The page goes first, as in a cluster (the watchdog pages at its first
			// wedged run, the rules wait out their `for`): Alertmanager's inhibitor
			// learns of alerts asynchronously, so a target posted in the same instant
			// as its source can beat it to a group that does not wait (group_wait 0s).
			if c.pushed {
				n := alert.Notification{Event: c.event, Severity: alert.Spec(c.event).Severity, Cluster: cluster, Namespace: "agentenv-sched",
					Reason: "routing test", Time: time.Now().UTC()}
				if c.event != alert.EventBlind {
					n.Pod = pod
				}
				must(t, sink.Send(ctx, n))
			}
			var posted []deliver.PostableAlert
			for _, name := range c.rules {
				r, ok := rules[name]
				if !ok {
					t.Fatalf("the chart renders no rule %s", name)
				}
				if name == c.want {
					postAlerts(t, am.Base, []deliver.PostableAlert{ruleAlert(r, cluster, pod)})
					continue
				}
				posted = append(posted, ruleAlert(r, cluster, pod))
			}
			waitFor(t, 30*time.Second, "the page delivered", func() bool { return len(rcv.about(cluster)) > 0 })
			postAlerts(t, am.Base, posted)
			// Every rule alert but the one that pages is inhibited: Alertmanager marks
			// it when its group would notify, so this waits for every group's first
			// flush; later flushes mute it again.
			inhibited := func() (bool, string) {
				var states []string
				muted := 0
				for _, name := range c.rules {
					for _, a := range amAlerts(t, am, cluster, name) {
						states = append(states, fmt.Sprintf("%s %s inhibited by %v", name, a.Status.State, a.Status.InhibitedBy))
						if name != c.want && a.Status.State == "suppressed" && len(a.Status.InhibitedBy) > 0 {
							muted++
						}
					}
				}
				return muted == len(posted), strings.Join(states, "; ")
			}
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
				done, states := inhibited()
				if done {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("timed out: alerts %s; notifications %+v", states, rcv.about(cluster))
				}
			}
			got := rcv.about(cluster)
			if len(got) != 1 || len(got[0].Alerts) != 1 || got[0].Alerts[0].Labels["alertname"] != c.want {
				t.Fatalf("notifications %+v, want one, of %s", got, c.want)
			}
			if got[0].Receiver != c.receiver {
				t.Errorf("%s went to %s, want %s", c.want, got[0].Receiver, c.receiver)
			}
		})
	}
}

// routingExample is the YAML block after docs/alerts.md's routing-example marker.
func routingExample(t *testing.T) map[string]any {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(chartDir)), "docs", "alerts.md"))
	must(t, err)
	_, rest, ok := strings.Cut(string(doc), "<!-- routing-example:")
	if !ok {
		t.Fatal("docs/alerts.md has no routing-example marker")
	}
	_, rest, ok = strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("no yaml block after the routing-example marker")
	}
	var cfg map[string]any
	must(t, utilyaml.Unmarshal([]byte(block), &cfg))
	if _, ok := cfg["route"].(map[string]any); !ok {
		t.Fatalf("the routing example has no route:\n%s", block)
	}
	return cfg
}

// receiverNames lists the receivers a route tree names, each once.
func receiverNames(route any) []string {
	var out []string
	var walk func(any)
	walk = func(r any) {
		m, _ := r.(map[string]any)
		if name, ok := m["receiver"].(string); ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
		routes, _ := m["routes"].([]any)
		for _, c := range routes {
			walk(c)
		}
	}
	walk(route)
	return out
}

// ruleAlert is the alert Prometheus sends when rule fires for the scheduler pod:
// the series' labels its expression keeps (namespace, job, pod), then the rule's own
// labels over them, then the cluster as an external label.
func ruleAlert(r rule, cluster, pod string) deliver.PostableAlert {
	labels := map[string]string{"alertname": r.Alert, "namespace": "agentenv-sched", "pod": pod, "cluster": cluster}
	if strings.Contains(r.Expr, "agentenv_watchdog_") {
		// The watchdog's series carry its own namespace and job (the PodMonitor's).
		labels["namespace"], labels["job"] = "agentenv-system", "wd-agentenv-scheduler-watchdog"
	}
	maps.Copy(labels, r.Labels)
	now := time.Now().UTC()
	return deliver.PostableAlert{Labels: labels, Annotations: r.Annotations, StartsAt: now, EndsAt: now.Add(time.Hour)}
}

func postAlerts(t *testing.T, base string, alerts []deliver.PostableAlert) {
	t.Helper()
	body, err := json.Marshal(alerts)
	must(t, err)
	resp, err := http.Post(base+deliver.AlertmanagerAPIPath, "application/json", bytes.NewReader(body))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST alerts: %s", resp.Status)
	}
}

func amAlerts(t *testing.T, am *testenv.Alertmanager, cluster, alertname string) []testenv.GettableAlert {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := am.Alerts(ctx, fmt.Sprintf("cluster=%q", cluster))
	must(t, err)
	var keep []testenv.GettableAlert
	for _, a := range out {
		if a.Labels["alertname"] == alertname {
			keep = append(keep, a)
		}
	}
	return keep
}

// notification is the part of Alertmanager's webhook payload the test reads.
type notification struct {
	Receiver string `json:"receiver"`
	Alerts   []struct {
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
}

// notificationReceiver records what Alertmanager's webhook receivers are sent.
type notificationReceiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []notification
}

func newNotificationReceiver(t *testing.T) *notificationReceiver {
	r := &notificationReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var n notification
		if err := json.NewDecoder(req.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.got = append(r.got, n)
		r.mu.Unlock()
	}))
	t.Cleanup(r.Close)
	return r
}

// about lists the notifications whose alerts are of cluster.
func (r *notificationReceiver) about(cluster string) []notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notification
	for _, n := range r.got {
		if len(n.Alerts) > 0 && n.Alerts[0].Labels["cluster"] == cluster {
			out = append(out, n)
		}
	}
	return out
}
