package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// TestHistorySaysWhetherARestartHealed: history and status read whether a restart
// healed from its record (healedAt: the replacement was seen healthy;
// ineffective: it wedged again), and say so when neither is known yet.
func TestHistorySaysWhetherARestartHealed(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	s := state.New()
	s.Restarts = []state.Restart{
		{Pod: "healed", UID: "u1", Method: "delete", ClaimedAt: now.Add(-50 * time.Minute), DoneAt: at(-50 * time.Minute), Outcome: state.RestartDone, HealedAt: at(-48 * time.Minute)},
		{Pod: "ineffective", UID: "u2", Method: "delete", ClaimedAt: now.Add(-30 * time.Minute), DoneAt: at(-30 * time.Minute), Outcome: state.RestartDone, Ineffective: "its replacement wedged again 3m after it started"},
		{Pod: "pending", UID: "u3", Method: "delete", ClaimedAt: now.Add(-2 * time.Minute), DoneAt: at(-2 * time.Minute), Outcome: state.RestartDone},
		{Pod: "failed", UID: "u4", Method: "delete", ClaimedAt: now.Add(-time.Minute), Outcome: state.RestartFailed, Error: "forbidden"},
	}
	want := map[string]string{
		"healed":      "yes: its replacement was healthy at 2026-12-01T11:12:00Z",
		"ineffective": "no: its replacement wedged again 3m after it started",
		"pending":     "not yet known: its replacement has not been seen healthy",
		"failed":      "",
	}
	for _, e := range stateHistory(s, now) {
		if e.Kind == "restart" && e.Healed != want[e.Pod] {
			t.Errorf("restart of %s: healed %q, want %q", e.Pod, e.Healed, want[e.Pod])
		}
	}

	var b bytes.Buffer
	if err := writeStatusText(&b, "ns/cm", &statestore.Snapshot{State: s}, now); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "delete healed (u1) (healed)") {
		t.Errorf("status does not say the first restart healed:\n%s", out)
	}
	s.Restarts = s.Restarts[:1]
	b.Reset()
	if err := writeStatusText(&b, "ns/cm", &statestore.Snapshot{State: s}, now); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "  healed: yes: its replacement was healthy at 2026-12-01T11:12:00Z") {
		t.Errorf("status's last restart does not say it healed:\n%s", out)
	}
}

// TestHistoryMarksABundleWhoseSealFails: history says, beside a restart and on
// the bundle itself, that its evidence bundle's seal does not verify.
func TestHistoryMarksABundleWhoseSealFails(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s := state.New()
	s.Restarts = []state.Restart{
		{Pod: "forged", UID: "u1", Method: "delete", ClaimedAt: now.Add(-time.Hour), Outcome: state.RestartDone, Bundle: "a.json"},
		{Pod: "genuine", UID: "u2", Method: "delete", ClaimedAt: now.Add(-time.Minute), Outcome: state.RestartDone, Bundle: "b.json"},
	}
	bundles := []evidence.Bundle{{Key: "a.json", Integrity: evidence.IntegrityBroken}, {Key: "b.json", Integrity: evidence.IntegritySealed}}
	entries := stateHistory(s, now)
	markBundles(entries, bundles)
	var b bytes.Buffer
	if err := writeHistoryText(&b, entries, nil); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.Count(out, "SEAL DOES NOT VERIFY") != 1 || !strings.Contains(out, "forged: restart") {
		t.Errorf("history does not mark the one forged bundle:\n%s", out)
	}
	for _, bundle := range bundles {
		b.Reset()
		if err := writeBundleText(&b, bundle); err != nil {
			t.Fatal(err)
		}
		if broken := strings.Contains(b.String(), "seal: ✗ SEAL DOES NOT VERIFY"); broken != (bundle.Integrity == evidence.IntegrityBroken) {
			t.Errorf("bundle %s (%s):\n%s", bundle.Key, bundle.Integrity, b.String())
		}
	}
}
