package deliver_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/state"
)

// Shadow mode's alerts: its restart is a would-restart (its own event, a warning,
// its own alertname), and every notification of a shadow run says shadow in every
// sink's rendering. The real receivers are tested in test/integration.
func TestShadowAlertsSayShadowInEverySink(t *testing.T) {
	now := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	since := now.Add(-6 * time.Minute)
	ready, expected := 0, 3
	target := decide.Target{Pod: "agentenv-scheduler-abc12", UID: "uid-a", Judged: true, Verdict: state.VerdictWedged, Action: state.ActionRestart,
		Reason: "ready 0 while the API server lists 3 serving node(s)", Ready: &ready, Expected: &expected, Evidence: state.EvidenceStrong,
		BadSince: &since, BadFor: state.Duration(6 * time.Minute)}
	res := decide.Result{Verdict: state.VerdictWedged, Action: state.ActionRestart, Targets: []decide.Target{target}}
	cfg, src, mode := alert.PlanConfig{RealertInterval: time.Hour, BlindAfter: 3, WedgedFor: 150 * time.Second}, alert.Source{Cluster: "prod-eu1", Namespace: "agentenv-system", Version: "test"}, state.ModeShadow
	notes := alert.Plan(state.New(), res, []alert.ActOutcome{{Target: target, Detail: "shadow mode: would have restarted pod agentenv-scheduler-abc12 (delete); nothing was restarted"}}, nil, now, src, mode, cfg)

	var events []string
	for _, n := range notes {
		events = append(events, n.Event+"/"+n.Severity)
		if !n.Shadow {
			t.Errorf("%s: not marked shadow", n.Event)
		}
		body, err := json.Marshal(n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), `"shadow":true`) {
			t.Errorf("%s: webhook payload without \"shadow\": true: %s", n.Event, body)
		}
		msg := deliver.SlackMessage(n, "")
		if !strings.Contains(msg.Blocks[0].Text.Text, "[shadow]") || !strings.HasPrefix(msg.Text, "[shadow] ") {
			t.Errorf("%s: Slack title %q / fallback %q without [shadow]", n.Event, msg.Blocks[0].Text.Text, msg.Text)
		}
		am := (&deliver.Alertmanager{TTL: 15 * time.Minute}).Alerts(n)
		if len(am) != 1 || am[0].Labels["shadow"] != "true" || !strings.HasPrefix(am[0].Annotations["summary"], "[shadow] ") {
			t.Errorf("%s: Alertmanager alerts %+v: want a shadow label and summary", n.Event, am)
		}
	}
	if strings.Join(events, ",") != "wedged/critical,would-restart/warning" {
		t.Errorf("planned %v, want wedged and a would-restart warning (no restarted)", events)
	}
	name := alert.Spec(alert.EventWouldRestart).Alertname
	if name == "" || name == alert.Spec(alert.EventRestarted).Alertname {
		t.Errorf("would-restart alertname %q: want one of its own", name)
	}

	// A live run's alerts carry no shadow marker.
	mode = state.ModeLive
	for _, n := range alert.Plan(state.New(), res, nil, nil, now, src, mode, cfg) {
		if body, _ := json.Marshal(n); n.Shadow || strings.Contains(string(body), "shadow") || strings.Contains(deliver.SlackMessage(n, "").Text, "shadow") {
			t.Errorf("live %s marked shadow", n.Event)
		}
	}
}
