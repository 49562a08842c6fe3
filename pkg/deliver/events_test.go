package deliver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// TestEverySinkUsesTheTable: for each event, Slack's title starts with its emoji; Alertmanager
// labels it with its alertname and severity (a resolution resolves the alerts it
// closes instead), and refreshes exactly the ongoing ones.
func TestEverySinkUsesTheTable(t *testing.T) {
	for _, e := range alert.Events {
		t.Run(e.Name, func(t *testing.T) {
			// The plan takes severity and next step from the table (pkg/alert's
			// TestPlanUsesTheTable): so does this notification.
			n := goldenNotification()
			n.Event, n.Severity, n.NextStep, n.Time = e.Name, e.Severity, e.NextStep, t0
			msg := SlackMessage(n, "")
			if title := msg.Blocks[0].Text.Text; !strings.HasPrefix(title, e.Emoji+" ") {
				t.Errorf("Slack title %q does not start with %s", title, e.Emoji)
			}
			if !strings.Contains(msg.Text, "["+strings.ToUpper(e.Severity)+"]") {
				t.Errorf("Slack fallback %q lacks the severity", msg.Text)
			}

			srv := newCaptureServer(t)
			am := testAlertmanager(t, srv.URL)
			if e.Kind == alert.Resolution {
				n.Closes = []alert.Closed{{Event: alert.EventWedged, Pod: n.Pod, OpenedAt: t0.Add(-time.Hour)}}
				got := am.Alerts(n)
				if len(got) != 1 || got[0].Labels["alertname"] != alert.Spec(alert.EventWedged).Alertname || !got[0].EndsAt.Equal(t0) {
					t.Errorf("resolution posts %+v, want the closed wedge resolved", got)
				}
			} else {
				got := am.Alerts(n)
				if len(got) != 1 || got[0].Labels["alertname"] != e.Alertname || got[0].Labels["severity"] != e.Severity ||
					!strings.Contains(got[0].Annotations["description"], "Next step: "+e.NextStep) {
					t.Errorf("Alertmanager alerts %+v", got)
				}
			}
			open := map[string]*state.Alert{e.Name: {Event: e.Name, OpenedAt: t0, Pod: n.Pod}}
			if _, err := am.Refresh(context.Background(), open, t0); err != nil {
				t.Fatal(err)
			}
			posted := 0
			for _, r := range srv.requests() {
				for _, a := range decodeAlerts(t, r.body) {
					if a.Labels["event"] == e.Name {
						posted++
					}
				}
			}
			if want := map[bool]int{true: 1, false: 0}[e.Kind == alert.Ongoing]; posted != want {
				t.Errorf("refresh posted %d %s alerts, want %d (kind %s)", posted, e.Name, want, e.Kind)
			}
		})
	}
}

// TestAlertmanagerRefusesUnnamedEvent: an event Alertmanager has no name for is a
// failed delivery (kept and reported), never a silent success.
func TestAlertmanagerRefusesUnnamedEvent(t *testing.T) {
	srv := newCaptureServer(t)
	am := testAlertmanager(t, srv.URL)
	n := goldenNotification()
	n.Event = "no-such-event"
	if err := am.Send(context.Background(), n); err == nil || !strings.Contains(err.Error(), "no alertname") {
		t.Fatalf("Send of an unnamed event: %v, want an error", err)
	}
	if len(srv.requests()) != 0 {
		t.Error("an unnamed event was posted")
	}
}
