package deliver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

const (
	amPathSecret  = "/XXXXAMPATHSECRET"
	amTokenSecret = "tok-XXXXAMTOKENSECRET"
	amPassSecret  = "pw-XXXXAMPASSSECRET"
)

func testAlertmanager(t *testing.T, urls ...string) *Alertmanager {
	t.Helper()
	am, err := NewAlertmanager(urls, 2*time.Second, 1, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	am.TTL = 15 * time.Minute
	am.RunbookURL = "https://runbooks.example.com/agentenv/scheduler-wedged"
	am.Source = alert.Source{Cluster: "prod-eu1", Namespace: "agentenv-system"}
	return am
}

func decodeAlerts(t *testing.T, body []byte) []PostableAlert {
	t.Helper()
	var out []PostableAlert
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatalf("body is not a list of postable alerts: %v\n%s", err, body)
	}
	return out
}

// TestAlertmanagerPayloadGolden: the documented payloads (docs/alerts.md) of an
// ongoing alert, a one-shot, the resolution sent by recovered, and a refresh.
func TestAlertmanagerPayloadGolden(t *testing.T) {
	srv := newCaptureServer(t)
	am := testAlertmanager(t, srv.URL+"/am/")
	am.GeneratorURL = "https://grafana.example.com/explore?watchdog"
	ctx := context.Background()
	n := goldenNotification()

	if err := am.Send(ctx, n); err != nil {
		t.Fatal(err)
	}
	restarted := goldenNotification()
	restarted.Event, restarted.Severity, restarted.Action = alert.EventRestarted, alert.SeverityWarning, "restart"
	restarted.Reason, restarted.NextStep = "deleted pod agentenv-scheduler-7d9f8b6c5-x2x4k (uid precondition)", alert.Spec(alert.EventRestarted).NextStep
	restarted.Time = n.Time.Add(5 * time.Minute)
	if err := am.Send(ctx, restarted); err != nil {
		t.Fatal(err)
	}
	rec := goldenNotification()
	rec.Event, rec.Severity, rec.Action, rec.Verdict = alert.EventRecovered, alert.SeverityInfo, "none", "healthy"
	rec.Reason, rec.NextStep = "3 of 3 nodes ready; was restarted, wedged since 2026-03-01T10:05:00Z", alert.Spec(alert.EventRecovered).NextStep
	rec.Time = n.Time.Add(10 * time.Minute)
	rec.Closes = []alert.Closed{
		{Event: alert.EventRestarted, Pod: n.Pod, OpenedAt: restarted.Time},
		{Event: alert.EventWedged, Pod: n.Pod, OpenedAt: n.Time},
	}
	if err := am.Send(ctx, rec); err != nil {
		t.Fatal(err)
	}
	open := map[string]*state.Alert{
		alert.EventWedged:         {Event: alert.EventWedged, OpenedAt: n.Time, Pod: n.Pod},
		alert.EventRestartBlocked: {Event: alert.EventRestartBlocked, OpenedAt: n.Time, Pod: n.Pod},
		alert.EventRestarted:      {Event: alert.EventRestarted, OpenedAt: n.Time, Pod: n.Pod}, // one-shot: not refreshed
	}
	if k, err := am.Refresh(ctx, open, n.Time.Add(5*time.Minute)); err != nil || k != 2 {
		t.Fatalf("refresh sent %d alerts, err %v; want 2", k, err)
	}

	reqs := srv.requests()
	if len(reqs) != 4 {
		t.Fatalf("%d requests, want 4", len(reqs))
	}
	for _, r := range reqs {
		if r.method != http.MethodPost || r.path != "/am/api/v2/alerts" || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s %v", r.method, r.path, r.header)
		}
		if r.header.Get("Authorization") != "" {
			t.Errorf("authorization without credentials: %v", r.header)
		}
	}
	golden(t, "alertmanager-wedged.json", reqs[0].body)
	golden(t, "alertmanager-restarted.json", reqs[1].body)
	golden(t, "alertmanager-recovered.json", reqs[2].body)
	golden(t, "alertmanager-refresh.json", reqs[3].body)

	// The properties the golden files stand for, stated once more so that a
	// regenerated golden file cannot hide them.
	w := decodeAlerts(t, reqs[0].body)[0]
	if w.Labels["alertname"] != "AgentenvSchedulerWedged" || w.Labels["pod"] != n.Pod || w.Labels["event"] != "wedged" ||
		w.Labels["severity"] != "critical" || w.Labels["cluster"] != "prod-eu1" || w.Labels["namespace"] != "agentenv-system" ||
		!w.StartsAt.Equal(n.Time) || !w.EndsAt.Equal(n.Time.Add(15*time.Minute)) || w.Annotations["runbook_url"] == "" {
		t.Errorf("wedged alert %+v", w)
	}
	res := decodeAlerts(t, reqs[2].body)
	if len(res) != 2 || res[1].Labels["alertname"] != "AgentenvSchedulerWedged" || res[1].Labels["pod"] != n.Pod || !res[1].EndsAt.Equal(rec.Time) {
		t.Errorf("recovered resolves %+v", res)
	}
	for k, v := range w.Labels {
		if res[1].Labels[k] != v {
			t.Errorf("the resolution's label %s=%q differs from the alert's %q: Alertmanager would not match them", k, res[1].Labels[k], v)
		}
	}
	ref := decodeAlerts(t, reqs[3].body)
	for k, v := range w.Labels {
		if ref[1].Labels[k] != v {
			t.Errorf("the refresh's label %s=%q differs from the alert's %q", k, ref[1].Labels[k], v)
		}
	}
}

// TestAlertmanagerRetriedAlertKeepsItsEnd: an alert retried from the outbox after
// its TTL ends in the past, so Alertmanager takes it as resolved, not firing anew.
func TestAlertmanagerRetriedAlertKeepsItsEnd(t *testing.T) {
	am := testAlertmanager(t, "http://127.0.0.1:1")
	n := goldenNotification()
	n.Time = time.Now().Add(-time.Hour)
	a := am.Alerts(n)
	if len(a) != 1 || !a[0].EndsAt.Before(time.Now()) {
		t.Fatalf("an hour-old alert ends at %v", a)
	}
	// recovered with nothing to close, and events that are not alerts, post nothing.
	rec := goldenNotification()
	rec.Event = alert.EventRecovered
	if got := am.Alerts(rec); len(got) != 0 {
		t.Errorf("recovered without closes: %+v", got)
	}
}

// A recovered retried from an outbox an older build wrote may close an event this build has
// no alertname for: that close is skipped (its alert ends with its TTL), the others resolved.
func TestAlertmanagerResolvesOnlyClosesWithAnAlertname(t *testing.T) {
	am := testAlertmanager(t, "http://127.0.0.1:1")
	rec := goldenNotification()
	rec.Event = alert.EventRecovered
	rec.Closes = []alert.Closed{{Event: "an-event-of-an-older-build", OpenedAt: rec.Time.Add(-time.Hour)},
		{Event: alert.EventRecovered}, {Event: alert.EventWedged, Pod: rec.Pod, OpenedAt: rec.Time.Add(-time.Hour)}}
	got := am.Alerts(rec)
	if len(got) != 1 || got[0].Labels["alertname"] != alert.Spec(alert.EventWedged).Alertname {
		t.Errorf("resolves %+v, want only the wedged alert", got)
	}
}

func TestAlertmanagerAuth(t *testing.T) {
	for _, c := range []struct {
		name          string
		user, pw, tok string
		want          string
	}{
		{name: "basic", user: "watchdog", pw: amPassSecret, want: "Basic " + base64.StdEncoding.EncodeToString([]byte("watchdog:"+amPassSecret))},
		{name: "bearer", tok: amTokenSecret, want: "Bearer " + amTokenSecret},
		{name: "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newCaptureServer(t)
			am := testAlertmanager(t, srv.URL)
			am.Username, am.Password, am.BearerToken = c.user, c.pw, c.tok
			if err := am.Send(context.Background(), goldenNotification()); err != nil {
				t.Fatal(err)
			}
			if k, err := am.Refresh(context.Background(), map[string]*state.Alert{alert.EventBlind: {Event: alert.EventBlind, OpenedAt: time.Now()}}, time.Now()); k != 1 || err != nil {
				t.Fatalf("refresh %d %v", k, err)
			}
			reqs := srv.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			for _, r := range reqs {
				if got := r.header.Get("Authorization"); got != c.want {
					t.Errorf("Authorization %q, want %q", got, c.want)
				}
				if r.path != "/api/v2/alerts" {
					t.Errorf("path %q", r.path)
				}
			}
		})
	}
}

// TestAlertmanagerHAGroup: every peer gets the alerts; one accepting is enough, the
// failed peer is reported through Warn; all failing is an error. No error names a
// URL or a credential.
func TestAlertmanagerHAGroup(t *testing.T) {
	up, down := newCaptureServer(t), newCaptureServer(t)
	down.status = func(int) int { return http.StatusBadRequest }
	am := testAlertmanager(t, down.URL+amPathSecret, up.URL+amPathSecret)
	am.BearerToken = amTokenSecret
	var warned []error
	am.Warn = func(err error) { warned = append(warned, err) }

	if err := am.Send(context.Background(), goldenNotification()); err != nil {
		t.Fatalf("one peer accepted, yet: %v", err)
	}
	if len(up.requests()) != 1 || len(down.requests()) != 1 {
		t.Fatalf("peers got %d and %d requests, want 1 each", len(up.requests()), len(down.requests()))
	}
	if len(warned) != 1 || !strings.Contains(warned[0].Error(), "alertmanager[1]: answered 400") {
		t.Fatalf("warned %v, want the first peer's 400", warned)
	}

	up.status = func(int) int { return http.StatusInternalServerError }
	err := am.Send(context.Background(), goldenNotification())
	if err == nil || !strings.Contains(err.Error(), "alertmanager[1]: answered 400") || !strings.Contains(err.Error(), "alertmanager[2]: answered 500") {
		t.Fatalf("both peers failed, got %v", err)
	}
	for _, e := range append(warned, err) {
		for _, secret := range []string{amPathSecret, amTokenSecret, "127.0.0.1"} {
			if strings.Contains(e.Error(), secret) {
				t.Errorf("error %q names %q", e, secret)
			}
		}
	}
}

func TestDispatcherRefresh(t *testing.T) {
	srv := newCaptureServer(t)
	am := testAlertmanager(t, srv.URL)
	d := &Dispatcher{Sinks: []alert.Sink{&Webhook{Poster: testPoster(srv.URL + "/hook"), Now: time.Now}, am}}
	now := time.Now()
	s := state.New()
	if ds := d.Deliver(context.Background(), s, nil, now); len(ds) != 0 {
		t.Errorf("no open alert, yet %+v", ds)
	}
	s.Alerts[alert.EventRestarted] = &state.Alert{Event: alert.EventRestarted, OpenedAt: now}
	if ds := d.Deliver(context.Background(), s, nil, now); len(ds) != 0 || len(srv.requests()) != 0 {
		t.Errorf("only a one-shot open, yet %+v", ds)
	}
	s.Alerts[alert.EventWedged] = &state.Alert{Event: alert.EventWedged, OpenedAt: now, Pod: "p"}
	d.Mode = state.ModeDryRun
	if ds := d.Deliver(context.Background(), s, nil, now); len(ds) != 0 || len(srv.requests()) != 0 {
		t.Errorf("a dry run refreshed: %+v", ds)
	}
	d.Mode = state.ModeLive
	ds := d.Deliver(context.Background(), s, nil, now)
	if len(ds) != 1 || ds[0].Sink != "alertmanager" || ds[0].Event != EventRefresh || !ds[0].OK {
		t.Fatalf("deliveries %+v", ds)
	}
	reqs := srv.requests()
	if len(reqs) != 1 || reqs[0].path != "/api/v2/alerts" {
		t.Fatalf("requests %+v (the webhook is no refresher)", reqs)
	}
	if a := decodeAlerts(t, reqs[0].body); len(a) != 1 || a[0].Labels["event"] != alert.EventWedged || !a[0].EndsAt.Equal(now.Add(am.TTL).UTC()) {
		t.Errorf("refreshed %+v", a)
	}

	// A failed refresh is reported, not kept: the next run refreshes anyway.
	srv.status = func(int) int { return http.StatusBadRequest }
	ds = d.Deliver(context.Background(), s, nil, now)
	if len(ds) != 1 || ds[0].OK || ds[0].Kept || len(s.Outbox) != 0 {
		t.Errorf("failed refresh %+v, outbox %+v", ds, s.Outbox)
	}
	// Bounded by SendBy like every delivery.
	d.SendBy = time.Now().Add(-time.Second)
	srv.status = func(int) int { return http.StatusOK }
	if ds := d.Deliver(context.Background(), s, nil, now); len(ds) != 1 || ds[0].OK || !strings.Contains(ds[0].Error, "deadline") {
		t.Errorf("refresh past SendBy %+v", ds)
	}
}

// TestPlanRecoveredCloses: recovered names the alerts it closes, with the pod each
// was about, so that Alertmanager can resolve exactly the alerts it holds.
func TestPlanRecoveredCloses(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	cfg, src := alert.PlanConfig{RealertInterval: time.Hour, BlindAfter: 3, WedgedFor: 4 * time.Minute}, alert.Source{Namespace: "ns"}
	s := state.New()
	alert.Plan(s, result(target(state.VerdictWedged, state.ActionWait, time.Minute, now)), nil, nil, now, src, state.ModeLive, cfg)
	later := now.Add(5 * time.Minute)
	notes := alert.Plan(s, result(target(state.VerdictHealthy, state.ActionNone, 0, later)), nil, nil, later, src, state.ModeLive, cfg)
	if len(notes) != 1 || notes[0].Event != alert.EventRecovered {
		t.Fatalf("notes %+v", notes)
	}
	c := notes[0].Closes
	if len(c) != 1 || c[0].Event != alert.EventWedged || c[0].Pod != "agentenv-scheduler-abc12" || !c[0].OpenedAt.Equal(now) {
		t.Fatalf("closes %+v", c)
	}
	b, _ := json.Marshal(notes[0])
	if !strings.Contains(string(b), `"closes":[{"event":"wedged","pod":"agentenv-scheduler-abc12","openedAt":"2026-03-01T10:00:00Z"}]`) {
		t.Errorf("webhook payload %s", b)
	}
}

// TestCredentialsRedactedWherever: a receiver that answers 400 echoing the request's
// Authorization header (and a long page around it) leaves no credential in the
// error, whether the credential came from the URL (Go sends its user:password as a
// Basic header), from --alertmanager-password, or from the bearer token; and no
// credential is cut in two with its first part kept.
func TestCredentialsRedactedWherever(t *testing.T) {
	const user, pass = "amuser", "XXXXURLPASSSECRET"
	echo := func(pad int) *captureServer {
		srv := newCaptureServer(t)
		srv.status = func(int) int { return http.StatusBadRequest }
		// The header lands across the 256 bytes kept when pad is near 256.
		srv.body = func(r *http.Request) string {
			return strings.Repeat("x", pad) + " bad request: Authorization: " + r.Header.Get("Authorization") + " user=" + user + " pass=" + pass
		}
		return srv
	}
	basic := func(u, p string) string { return base64.StdEncoding.EncodeToString([]byte(u + ":" + p)) }
	for _, pad := range []int{0, 200, 230, 250} {
		for _, c := range []struct {
			name    string
			url     func(base string) string
			setup   func(am *Alertmanager)
			secrets []string
		}{
			{"credentials in the URL", func(b string) string { return strings.Replace(b, "http://", "http://"+user+":"+pass+"@", 1) }, func(*Alertmanager) {},
				[]string{pass, user + ":" + pass, basic(user, pass), basic(user, pass)[:12]}},
			{"basic auth flags", func(b string) string { return b }, func(am *Alertmanager) { am.Username, am.Password = user, amPassSecret },
				[]string{amPassSecret, basic(user, amPassSecret), basic(user, amPassSecret)[:12]}},
			{"bearer token", func(b string) string { return b }, func(am *Alertmanager) { am.BearerToken = amTokenSecret },
				[]string{amTokenSecret, amTokenSecret[:12]}},
		} {
			t.Run(fmt.Sprintf("%s/pad %d", c.name, pad), func(t *testing.T) {
				srv := echo(pad)
				am := testAlertmanager(t, c.url(srv.URL))
				c.setup(am)
				err := am.Send(context.Background(), goldenNotification())
				if err == nil || !strings.Contains(err.Error(), "answered 400") {
					t.Fatalf("want the 400 reported: %v", err)
				}
				if got := srv.requests(); len(got) != 1 || got[0].header.Get("Authorization") == "" {
					t.Fatalf("the request carried no credential: %+v", got)
				}
				for _, secret := range c.secrets {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error names %q: %v", secret, err)
					}
				}
			})
		}
	}
}

// TestOperatorLabels: the operator's labels go on every alert, ongoing, refreshed
// and resolved, and never replace the watchdog's own; Slack names them. A retried
// outbox entry gets them from the configuration, not from the state: pkg/outbox's
// TestRebuild.
func TestOperatorLabels(t *testing.T) {
	am := testAlertmanager(t, "http://127.0.0.1:1")
	labels := map[string]string{"team": "scheduling", "severity": "low"} // severity as a stale state might carry it
	am.Source.Labels = labels
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	n := alert.Notification{Event: alert.EventWedged, Severity: alert.SeverityCritical, Namespace: "agentenv-system", Pod: "p", Time: now, Labels: labels}
	recovered := alert.Notification{Event: alert.EventRecovered, Namespace: "agentenv-system", Time: now, Labels: labels,
		Closes: []alert.Closed{{Event: alert.EventWedged, Pod: "p", OpenedAt: now.Add(-time.Hour)}}}
	for _, a := range append(am.Alerts(n), am.Alerts(recovered)...) {
		if a.Labels["team"] != "scheduling" || a.Labels["severity"] != alert.SeverityCritical {
			t.Errorf("labels %v", a.Labels)
		}
	}
	if msg := SlackMessage(n, ""); !strings.Contains(fmt.Sprint(msg.Blocks[len(msg.Blocks)-1].Elements[1].Text), "severity=low · team=scheduling") {
		t.Errorf("Slack context %+v", msg.Blocks[len(msg.Blocks)-1].Elements)
	}
}
