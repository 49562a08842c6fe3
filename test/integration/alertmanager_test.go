package integration

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/events"
)

// Secret-looking parts of the Alertmanager configuration: the route prefix makes the
// URL's path carry one, the bearer token the other.
const (
	amRoutePrefix = "/XXXXAMPATHSECRET"
	amToken       = "tok-XXXXAMTOKENSECRET"
)

func init() { secretMarkers = append(secretMarkers, "XXXXAMPATHSECRET", "XXXXAMTOKENSECRET") }

// alertmanagerProc is a real Alertmanager on 127.0.0.1 with a route that sends
// nowhere.
type alertmanagerProc struct{ *testenv.Alertmanager }

func startAlertmanager(t *testing.T) *alertmanagerProc {
	t.Helper()
	bin := alertmanagerBin(t)
	// group_wait 1h: the receiver is a black hole anyway; the tests read the API.
	am, err := testenv.StartAlertmanager(bin, "route:\n  receiver: blackhole\n  group_wait: 1h\nreceivers:\n  - name: blackhole\n", amRoutePrefix, t.TempDir())
	must(t, err)
	t.Cleanup(am.Stop)
	return &alertmanagerProc{am}
}

// alertmanagerBin is the Alertmanager binary to run.
func alertmanagerBin(t *testing.T) string {
	return toolBinary(t, testenv.EnvAlertmanager, "alertmanager.sh")
}

// toolBinary is the binary a test runs from envVar (the Makefile sets it from
// hack/<script>); the test skips without one, and fails in CI.
func toolBinary(t *testing.T, envVar, script string) string {
	t.Helper()
	bin := os.Getenv(envVar)
	if bin == "" {
		msg := envVar + " is not set: run `make test`, or `" + envVar + "=$(hack/" + script + ") go test ./test/integration/`"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI must run the tests that need it)")
		}
		t.Skip(msg)
	}
	return bin
}

type gettableAlert = testenv.GettableAlert

// active lists the alerts Alertmanager holds as not yet resolved for namespace ns
// (resolved alerts, endsAt in the past, are not listed).
func (p *alertmanagerProc) active(t *testing.T, ns string) []gettableAlert {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := p.Alerts(ctx, fmt.Sprintf("namespace=%q", ns))
	must(t, err)
	return out
}

func alertNames(as []gettableAlert) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.Labels["alertname"])
	}
	return out
}

// TestAlertmanagerSink runs the real pipeline against two real Alertmanagers (an HA
// pair): the wedge becomes an active alert on both with the documented labels and
// annotations; it stays active across runs spaced past --alertmanager-alert-ttl
// (each run posts it again), also once a peer is down; recovered resolves it.
func TestAlertmanagerSink(t *testing.T) {
	am1, am2 := startAlertmanager(t), startAlertmanager(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	const ttl = 4 * time.Second
	runbook := "https://runbooks.example.com/agentenv/scheduler-wedged"
	flags := []string{
		"--alertmanager-url", am1.Base + "," + am2.Base, "--alertmanager-bearer-token", amToken,
		"--alertmanager-alert-ttl", ttl.String(), "--cluster-name", clusterName, "--runbook-url", runbook,
		// --wedged-for 1h: the wedge stays open (no restart) while runs repeat;
		// the realert interval keeps the runs after the first from sending wedged.
		"--wedged-for", "1h", "--realert-interval", "1h",
	}
	var runs []result

	// notify test reaches Alertmanager too (under a namespace of its own, so that
	// the counts below are the pipeline's).
	nt := runCLI(t, "notify", "test", "--alertmanager-url", am1.Base, "--alertmanager-bearer-token", amToken, "--namespace", s.ns+"-notify", "--cluster-name", clusterName)
	runs = append(runs, nt)
	if nt.code != 0 || !strings.Contains(nt.stdout, "alertmanager ok") {
		t.Fatalf("notify test: exit %d\n%s%s", nt.code, nt.stdout, nt.stderr)
	}
	if got := alertNames(am1.active(t, s.ns+"-notify")); len(got) != 1 || got[0] != "AgentenvWatchdogTest" {
		t.Fatalf("after notify test Alertmanager holds %v", got)
	}

	first := s.check(flags...)
	runs = append(runs, first)
	firstAt := time.Now()
	first.expect(t, 0, "wedged", "wait")
	if d := deliveries(first, "wedged", "alertmanager"); len(d) != 1 || !d[0].OK {
		t.Fatalf("report deliveries %+v", first.report.Alerts)
	}
	wantLabels := map[string]string{"alertname": "AgentenvSchedulerWedged", "severity": "critical", "event": "wedged",
		"namespace": s.ns, "pod": s.pod.Name, "cluster": clusterName}
	for i, am := range []*alertmanagerProc{am1, am2} {
		var wedged []gettableAlert
		for _, a := range am.active(t, s.ns) {
			if a.Labels["alertname"] == "AgentenvSchedulerWedged" {
				wedged = append(wedged, a)
			}
		}
		if len(wedged) != 1 {
			t.Fatalf("Alertmanager %d holds %d wedged alerts, want 1", i+1, len(wedged))
		}
		a := wedged[0]
		if len(a.Labels) != len(wantLabels) {
			t.Errorf("labels %v, want %v", a.Labels, wantLabels)
		}
		for k, v := range wantLabels {
			if a.Labels[k] != v {
				t.Errorf("label %s=%q, want %q", k, a.Labels[k], v)
			}
		}
		if a.Status.State != "active" || a.Annotations["runbook_url"] != runbook ||
			a.Annotations["summary"] != fmt.Sprintf("AgentENV scheduler wedged in %s/%s (pod %s)", clusterName, s.ns, s.pod.Name) ||
			!strings.Contains(a.Annotations["description"], "ready 0 while the API server lists 3 serving node(s)") ||
			!strings.Contains(a.Annotations["description"], "Next step: ") {
			t.Errorf("alert %+v", a)
		}
	}

	// One peer goes down: the pair still counts as delivered (the other accepted),
	// with a warning in the log.
	am2.Stop()
	for time.Since(firstAt) < ttl+time.Second {
		time.Sleep(ttl / 2)
		r := s.check(flags...)
		runs = append(runs, r)
		r.expect(t, 0, "wedged", "wait")
		if d := deliveries(r, deliver.EventRefresh, "alertmanager"); len(d) != 1 || !d[0].OK {
			t.Fatalf("refresh deliveries %+v", r.report.Alerts)
		}
		if !strings.Contains(r.stderr, "an Alertmanager peer refused the alerts; another accepted them") || !strings.Contains(r.stderr, "alertmanager[2]") {
			t.Errorf("no warning about the peer that is down:\n%s", r.stderr)
		}
		if got := am1.active(t, s.ns); len(got) != 1 || got[0].Labels["alertname"] != "AgentenvSchedulerWedged" {
			t.Fatalf("%s after the first post, Alertmanager holds %v, want the wedge still active", time.Since(firstAt).Round(time.Millisecond), alertNames(got))
		}
	}
	if got := am1.active(t, s.ns); len(got) != 1 || !got[0].EndsAt.After(firstAt.Add(ttl)) {
		t.Fatalf("the wedge was not posted again past its first TTL: %+v", got)
	}

	// Healthy again: recovered resolves it at once (not by expiry: the last refresh
	// has just pushed its end a TTL away).
	s.metrics.SetPage(fixture(t, "scheduler-metrics-healthy.txt"))
	rec := s.check(flags...)
	runs = append(runs, rec)
	rec.expect(t, 0, "healthy", "none")
	if d := deliveries(rec, "recovered", "alertmanager"); len(d) != 1 || !d[0].OK {
		t.Fatalf("recovered deliveries %+v", rec.report.Alerts)
	}
	if got := am1.active(t, s.ns); len(got) != 0 {
		t.Fatalf("after recovered Alertmanager still holds %v", alertNames(got))
	}
	// Nothing is open: a later run posts nothing that would bring it back.
	quiet := s.check(flags...)
	runs = append(runs, quiet)
	if d := deliveries(quiet, deliver.EventRefresh, "alertmanager"); len(d) != 0 {
		t.Errorf("a run with nothing open refreshed: %+v", quiet.report.Alerts)
	}
	if got := am1.active(t, s.ns); len(got) != 0 {
		t.Fatalf("after a quiet run Alertmanager holds %v", alertNames(got))
	}
	leakCheck(t, s, runs...)
}

// TestAlertmanagerURLCredentialsRedacted: credentials in --alertmanager-url reach
// the receiver (Go sends them as a Basic header); when it refuses with a 400 that
// echoes the header, no form of them lands in the logs, the Warning Event or the
// outbox's lastError.
func TestAlertmanagerURLCredentialsRedacted(t *testing.T) {
	const user, pass = "amuser", "XXXXAMURLPASSSECRET"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, "invalid request: Authorization: %s", r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	amURL := strings.Replace(srv.URL, "http://", "http://"+user+":"+pass+"@", 1)
	r := s.check("--alertmanager-url", amURL, "--wedged-for", "1h")
	r.expect(t, 0, "wedged", "wait")
	mu.Lock()
	sent := append([]string(nil), got...)
	mu.Unlock()
	if len(sent) == 0 || sent[0] != "Basic "+basic {
		t.Fatalf("the receiver got Authorization %q, want the URL's credentials", sent)
	}
	if d := deliveries(r, "wedged", "alertmanager"); len(d) != 1 || d[0].OK || !strings.Contains(d[0].Error, "answered 400") {
		t.Fatalf("deliveries %+v", r.report.Alerts)
	}
	st, _ := s.state()
	if len(st.Outbox) != 1 || !strings.Contains(st.Outbox[0].LastError, "<redacted>") {
		t.Fatalf("outbox %+v, want the failed alert kept with its redacted error", st.Outbox)
	}
	failed := s.events(s.pod.Name, events.ReasonAlertFailed)
	if len(failed) != 1 || !strings.Contains(failed[0].Message, "<redacted>") {
		t.Fatalf("%s Events %+v", events.ReasonAlertFailed, failed)
	}
	leakCheckFor(t, s, []string{pass, basic, user + ":" + pass}, r)
}

// TestAlertmanagerRestartIneffective: the page that says restarts do not heal
// reaches the real Alertmanager as its own critical alert on the replacement pod,
// and stays active across the runs of the back-off (it is ongoing: refreshed).
func TestAlertmanagerRestartIneffective(t *testing.T) {
	am := startAlertmanager(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	flags := []string{"--alertmanager-url", am.Base, "--alertmanager-bearer-token", amToken, "--cluster-name", clusterName}
	r := restartDoesNotHeal(t, s, func() {}, flags...)
	if d := deliveries(r, alert.EventRestartIneffective, "alertmanager"); len(d) != 1 || !d[0].OK {
		t.Fatalf("restart-ineffective deliveries %+v", r.report.Alerts)
	}
	want := alert.Spec(alert.EventRestartIneffective)
	find := func() *gettableAlert {
		for _, a := range am.active(t, s.ns) {
			if a.Labels["alertname"] == want.Alertname {
				return &a
			}
		}
		return nil
	}
	a := find()
	if a == nil {
		t.Fatalf("Alertmanager holds %v, no %s", alertNames(am.active(t, s.ns)), want.Alertname)
	}
	if a.Labels["severity"] != "critical" || a.Labels["event"] != alert.EventRestartIneffective || a.Labels["pod"] != "agentenv-scheduler-r1" ||
		a.Labels["cluster"] != clusterName || a.Status.State != "active" ||
		!strings.Contains(a.Annotations["description"], "did not heal the scheduler") ||
		!strings.Contains(a.Annotations["description"], "Next step: "+want.NextStep) {
		t.Errorf("alert %+v", *a)
	}
	// A run inside the back-off sends nothing new but keeps the page active.
	again := s.check(append([]string{"--restart-backoff", "30s", "--restart-backoff-max", "1h"}, flags...)...)
	again.expect(t, 0, "wedged", "blocked")
	if d := deliveries(again, deliver.EventRefresh, "alertmanager"); len(d) != 1 || !d[0].OK {
		t.Fatalf("refresh deliveries %+v", again.report.Alerts)
	}
	if b := find(); b == nil || !b.EndsAt.After(a.EndsAt) {
		t.Fatalf("the refresh did not extend the page: before %+v, after %+v", a, b)
	}
	leakCheck(t, s, r, again)
}

// TestAlertmanagerAcceptsEveryEvent: every event of the table, as the sink posts it,
// is accepted by the real Alertmanager and listed under its alertname and severity;
// recovered resolves the ones it closes.
func TestAlertmanagerAcceptsEveryEvent(t *testing.T) {
	am := startAlertmanager(t)
	sink, err := deliver.NewAlertmanager([]string{am.Base}, 5*time.Second, 1, 10*time.Second)
	must(t, err)
	ns := "every-event"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := time.Now().UTC()
	var closes []alert.Closed
	for _, e := range alert.Events {
		if e.Kind == alert.Resolution {
			continue
		}
		n := alert.Notification{Event: e.Name, Severity: e.Severity, Namespace: ns, Pod: "p-" + e.Name, Reason: "table test", NextStep: e.NextStep, Time: now}
		must(t, sink.Send(ctx, n))
		if e.Kind == alert.Ongoing {
			closes = append(closes, alert.Closed{Event: e.Name, Pod: n.Pod, OpenedAt: now})
		}
	}
	got := map[string]gettableAlert{}
	for _, a := range am.active(t, ns) {
		got[a.Labels["event"]] = a
	}
	for _, e := range alert.Events {
		a, ok := got[e.Name]
		switch {
		case e.Kind == alert.Resolution:
			if ok {
				t.Errorf("%s is listed as an alert of its own", e.Name)
			}
		case !ok:
			t.Errorf("%s: not in Alertmanager (holds %v)", e.Name, alertNames(am.active(t, ns)))
		case a.Labels["alertname"] != e.Alertname || a.Labels["severity"] != e.Severity || a.Status.State != "active":
			t.Errorf("%s: %+v", e.Name, a)
		}
	}
	for _, e := range alert.Events {
		if e.Kind == alert.Resolution {
			must(t, sink.Send(ctx, alert.Notification{Event: e.Name, Severity: e.Severity, Namespace: ns, Reason: "table test", Time: time.Now().UTC(), Closes: closes}))
		}
	}
	for _, a := range am.active(t, ns) {
		if alert.Spec(a.Labels["event"]).Kind == alert.Ongoing {
			t.Errorf("%s still active after recovered closed it", a.Labels["alertname"])
		}
	}
}

// TestAlertLabelsOnEverySink: --alert-labels (team routing) reach every alert: the
// real Alertmanager's labels (the watchdog's own unchanged), the webhook's labels,
// and Slack's message; a label the watchdog sets itself is refused.
func TestAlertLabelsOnEverySink(t *testing.T) {
	am := startAlertmanager(t)
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	flags := append(checkAlertFlags(rcv), "--alertmanager-url", am.Base, "--alertmanager-bearer-token", amToken,
		"--alert-labels", "team=scheduling, tier=1")
	s.check(flags...).expect(t, 0, "wedged", "wait")

	var wedged []gettableAlert
	for _, a := range am.active(t, s.ns) {
		if a.Labels["alertname"] == "AgentenvSchedulerWedged" {
			wedged = append(wedged, a)
		}
	}
	if len(wedged) != 1 || wedged[0].Labels["team"] != "scheduling" || wedged[0].Labels["tier"] != "1" ||
		wedged[0].Labels["severity"] != "critical" || wedged[0].Labels["namespace"] != s.ns {
		t.Errorf("Alertmanager holds %+v", wedged)
	}
	hooks := webhooks(t, rcv.since(0, webhookPath))
	if len(hooks) != 1 || hooks[0].Labels["team"] != "scheduling" || hooks[0].Labels["tier"] != "1" {
		t.Errorf("webhook notifications %+v", hooks)
	}
	slackBodies := rcv.since(0, slackPath)
	if len(slackBodies) != 1 || !strings.Contains(string(slackBodies[0].Body), "team=scheduling · tier=1") {
		t.Errorf("Slack messages %d, want one naming the labels", len(slackBodies))
	}
	bad := s.check(append(flags, "--alert-labels", "severity=low")...)
	if bad.code != 2 || !strings.Contains(bad.stderr, "the watchdog sets this label itself") {
		t.Errorf("a reserved label: exit %d\n%s", bad.code, bad.stderr)
	}
}
