package deliver

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// While the scheduler Deployment is paused, every alert of the run says so, in
// every sink: the page for a restart held by the pause, and any other.
func TestEveryAlertSaysPaused(t *testing.T) {
	pause := &decide.Pause{Deployment: "agentenv-scheduler", Reason: "etcd maintenance", Until: t0.Add(time.Hour)}
	wedged := target(state.VerdictWedged, state.ActionBlocked, 10*time.Minute, t0)
	wedged.Gates = []decide.Gate{{Name: decide.GatePaused, Detail: "paused: would restart; " + pause.String()}}
	res := result(wedged)
	res.Pause = pause
	s := state.New()
	s.ConsecutiveUnknownRuns = 5 // blind too
	notes := alert.Plan(s, res, nil, errors.New("cannot read Lease"), t0, src, state.ModeLive, planConfig())
	if len(notes) < 3 {
		t.Fatalf("want watchdog-error, wedged and restart-blocked at least: %d", len(notes))
	}
	am, err := NewAlertmanager([]string{"http://127.0.0.1:9093"}, time.Second, 1, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range notes {
		if n.Paused != pause.String() {
			t.Errorf("%s: paused %q", n.Event, n.Paused)
		}
		if n.Event == alert.EventRestartBlocked && !strings.Contains(n.Reason, "paused: would restart") {
			t.Errorf("the blocked restart must say it is paused: %q", n.Reason)
		}
		slack, _ := json.Marshal(SlackMessage(n, ""))
		if !strings.Contains(string(slack), "[paused]") || !strings.Contains(string(slack), "etcd maintenance") {
			t.Errorf("%s: Slack message does not say paused: %s", n.Event, slack)
		}
		for _, a := range am.Alerts(n) {
			if !strings.HasPrefix(a.Annotations["summary"], "[paused]") || !strings.Contains(a.Annotations["paused"], "etcd maintenance") {
				t.Errorf("%s: Alertmanager annotations %v", n.Event, a.Annotations)
			}
			if _, ok := a.Labels["paused"]; ok {
				t.Errorf("%s: the pause must not change the alert's identity (labels %v)", n.Event, a.Labels)
			}
		}
		body, _ := json.Marshal(n)
		if !strings.Contains(string(body), `"paused":"paused until`) {
			t.Errorf("%s: webhook payload lacks paused: %s", n.Event, body)
		}
	}
	// Not paused: no mark.
	for _, n := range alert.Plan(state.New(), result(target(state.VerdictWedged, state.ActionWait, 10*time.Minute, t0)), nil, nil, t0, src, state.ModeLive, planConfig()) {
		if n.Paused != "" {
			t.Errorf("%s marked paused without a pause", n.Event)
		}
	}
}
