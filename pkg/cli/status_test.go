package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// The status text shows a restart back-off and which restart did not heal: the
// on-call engineer asking "why is it not restarting?" reads it there.
func TestStatusTextShowsBackoff(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := state.New()
	s.Restarts = []state.Restart{{Pod: "sched-a", UID: "uid-a", Method: "delete", ClaimedAt: now.Add(-20 * time.Minute), Outcome: state.RestartDone, Ineffective: "its replacement wedged again"}}
	s.Backoff = &state.Backoff{Ineffective: 1, NotBefore: now.Add(-10 * time.Minute).Add(20 * time.Minute), Reason: "the delete of pod sched-a did not heal the scheduler"}
	var b bytes.Buffer
	if err := writeStatusText(&b, "ns/cm", &statestore.Snapshot{State: s}, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"restart back-off: 1 restart(s) in a row did not heal; next restart not before 2026-12-01T12:10:00Z", "did not heal the scheduler", "(did not heal)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// A run held by a pause says so in status and history.
func TestStatusAndHistorySayPaused(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := state.New()
	paused := "paused until 2026-12-01T14:00:00Z by annotation on Deployment agentenv-scheduler: etcd maintenance"
	s.LastRun = &state.Run{At: now.Add(-time.Minute), Verdict: "wedged", Action: "blocked", Outcome: state.RunOK, Paused: paused}
	var b bytes.Buffer
	if err := writeStatusText(&b, "ns/cm", &statestore.Snapshot{State: s}, now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), paused+": restarts nothing meanwhile") {
		t.Errorf("status does not say paused:\n%s", b.String())
	}
	found := false
	for _, e := range stateHistory(s, now) {
		found = found || (e.Kind == "pause" && strings.Contains(e.What, paused))
	}
	if !found {
		t.Errorf("history has no pause entry: %+v", stateHistory(s, now))
	}
}
