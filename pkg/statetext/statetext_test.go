package statetext

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/state"
)

var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) *time.Time { x := now.Add(d); return &x }

func statusText(t *testing.T, s *state.State) string {
	t.Helper()
	var b bytes.Buffer
	if err := (Status{ConfigMap: "ns/cm", State: s}).WriteText(&b, now); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func historyText(t *testing.T, h History) string {
	t.Helper()
	var b bytes.Buffer
	if err := h.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// everything is a state with one of each thing status and history show.
func everything() *state.State {
	s := state.New()
	s.LastRun = &state.Run{At: now.Add(-time.Minute), Verdict: "wedged", Action: "blocked", Outcome: state.RunOK, Reason: "sched-b wedged", Paused: "paused until 2026-12-01T14:00:00Z by annotation on Deployment agentenv-scheduler: etcd maintenance"}
	s.Pods["uid-b"] = &state.Pod{Name: "sched-b", LastVerdict: "wedged", LastSeen: now.Add(-time.Minute),
		Episode: &state.OpenEpisode{Kind: "wedged", Since: now.Add(-6 * time.Minute), Last: now.Add(-time.Minute), For: state.Duration(5 * time.Minute), Evidence: "strong", Expected: 3}}
	s.Episodes = []state.Episode{{Pod: "sched-0", Kind: "wedged", Evidence: "strong", Outcome: "restarted", From: now.Add(-3 * time.Hour), To: now.Add(-170 * time.Minute)}}
	s.Restarts = []state.Restart{{Pod: "sched-a", UID: "uid-a", Method: "delete", ClaimedAt: now.Add(-20 * time.Minute), DoneAt: at(-19 * time.Minute), ResumedAt: at(-19 * time.Minute),
		Outcome: state.RestartDone, Reason: "ready 0 of 3", Evidence: "strong", Gates: "wedged-for ✓", Bundle: "a.json", Ineffective: "its replacement wedged again"}}
	s.WouldRestarts = []state.WouldRestart{{Pod: "sched-w", At: now.Add(-2 * time.Hour), EpisodeSince: now.Add(-2*time.Hour - 4*time.Minute), Repeats: 2, LastAt: now.Add(-110 * time.Minute), Evidence: "weak", Gates: "shadow"}}
	s.Backoff = &state.Backoff{Ineffective: 1, LastRestartAt: now.Add(-19 * time.Minute), NotBefore: now.Add(10 * time.Minute)}
	s.Alerts["wedged"] = &state.Alert{Event: "wedged", Pod: "sched-b", OpenedAt: now.Add(-5 * time.Minute), Sends: 1, LastSentAt: at(-5 * time.Minute)}
	s.Outbox = []state.Pending{{Event: "restarted", Sinks: []string{"slack", "webhook"}, Attempts: 2, CreatedAt: now.Add(-18 * time.Minute), LastError: "503"}}
	return s
}

// TestStatusShowsTheHistoryEntries: status is a header (the last run, the pods)
// and then the state's entries exactly as history writes them, newest first, so
// a restart, an alert or a back-off reads the same in both commands.
func TestStatusShowsTheHistoryEntries(t *testing.T) {
	s := everything()
	entries := Entries(s)
	var kinds []string
	for i, e := range entries {
		if !slices.Contains(kinds, e.Kind) {
			kinds = append(kinds, e.Kind)
		}
		if i > 0 && e.At.After(entries[i-1].At) {
			t.Errorf("entries not newest first at %d: %v after %v", i, e.At, entries[i-1].At)
		}
	}
	slices.Sort(kinds)
	if want := []string{"alert", "back-off", "episode", "pause", "restart", "would-restart"}; !slices.Equal(kinds, want) {
		t.Errorf("entry kinds %v, want %v", kinds, want)
	}
	history := historyText(t, History{Entries: entries})
	status := statusText(t, s)
	if !strings.HasSuffix(status, "\n"+history) {
		t.Errorf("status does not end with history's entries:\n--- status\n%s--- history\n%s", status, history)
	}
	for _, want := range []string{
		"state: ns/cm\n",
		"last run: 2026-12-01T11:59:00Z (1m0s ago, took 0s): ok, verdict wedged, action blocked\n  sched-b wedged\n",
		"sched-b  uid-b  wedged        2026-12-01T11:59:00Z  wedged since 2026-12-01T11:54:00Z  5m       strong    -",
		"back-off     : 1 restart(s) in a row did not heal: next restart not before 2026-12-01T12:10:00Z\n    reason: 1 restart(s) in a row did not heal the scheduler, the last claimed at 2026-12-01T11:41:00Z; restarts wait until 2026-12-01T12:10:00Z; the cause is likely outside the scheduler (its RBAC for EndpointSlices, the network to the nodes)\n",
		"restart       sched-a: restart by delete: done\n",
		"    healed: no: its replacement wedged again\n    evidence bundle: a.json\n",
		"    note: the run that claimed it did not finish; a later run completed it at 2026-12-01T11:41:00Z\n",
		"would-restart sched-w: shadow mode: would have restarted it 4m into the episode (nothing was restarted)\n",
		"    note: due again 2 more time(s) in the same episode, last 2026-12-01T10:10:00Z\n",
		"pause        : paused until 2026-12-01T14:00:00Z by annotation on Deployment agentenv-scheduler: etcd maintenance; the watchdog judges, records and pages, and restarts nothing\n",
		"alert         sched-b: wedged open since 2026-12-01T11:55:00Z, sent 1 time(s)\n",
		"alert        : restarted not yet delivered to slack, webhook after 2 attempt(s)\n    reason: 503\n",
		"episode       sched-b: wedged since 2026-12-01T11:54:00Z (5m so far), ready 0 of 3\n",
		"episode       sched-0: wedged episode ended (restarted): 2026-12-01T09:00:00Z → 2026-12-01T09:10:00Z\n",
	} {
		if !strings.Contains(status, want) {
			t.Errorf("status lacks %q:\n%s", want, status)
		}
	}
	if empty := statusText(t, state.New()); !strings.Contains(empty, "last run: none recorded\n") || !strings.HasSuffix(empty, "nothing recorded\n") {
		t.Errorf("status of an empty state:\n%s", empty)
	}
}

// The JSON of status and history keeps its fields: scripts read .state and
// .entries.
func TestStatusAndHistoryJSONFields(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{Status{ConfigMap: "ns/cm", ResourceVersion: "7", Warning: "w", State: state.New()}, `{"configMap":"ns/cm","resourceVersion":"7","warning":"w","state":{`},
		{History{Entries: []Entry{{At: now, Kind: "event", What: "x"}}, Notes: []string{"n"}}, `{"entries":[{"at":"2026-12-01T12:00:00Z","kind":"event","what":"x"}],"notes":["n"]}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || !strings.HasPrefix(string(b), c.want) {
			t.Errorf("JSON %s (%v), want it to start %s", b, err, c.want)
		}
	}
}

// TestHistorySaysWhetherARestartHealed: history and status read whether a restart
// healed from its record (healedAt: the replacement was seen healthy;
// ineffective: it wedged again), and say so when neither is known yet.
func TestHistorySaysWhetherARestartHealed(t *testing.T) {
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
	for _, e := range Entries(s) {
		if e.Kind == "restart" && e.Healed != want[e.Pod] {
			t.Errorf("restart of %s: healed %q, want %q", e.Pod, e.Healed, want[e.Pod])
		}
	}
	out := statusText(t, s)
	for pod, healed := range want {
		if healed != "" && !strings.Contains(out, "restart       "+pod+": restart by delete: done\n    healed: "+healed+"\n") {
			t.Errorf("status does not say whether the restart of %s healed (%s):\n%s", pod, healed, out)
		}
	}
	if !strings.Contains(out, "failed: restart by delete: failed\n    note: forbidden\n") {
		t.Errorf("status does not say why the restart failed:\n%s", out)
	}
}

// TestHistoryMarksABundleWhoseSealFails: history says, beside a restart and on
// the bundle itself, that its evidence bundle's seal does not verify.
func TestHistoryMarksABundleWhoseSealFails(t *testing.T) {
	s := state.New()
	s.Restarts = []state.Restart{
		{Pod: "forged", UID: "u1", Method: "delete", ClaimedAt: now.Add(-time.Hour), Outcome: state.RestartDone, Bundle: "a.json"},
		{Pod: "genuine", UID: "u2", Method: "delete", ClaimedAt: now.Add(-time.Minute), Outcome: state.RestartDone, Bundle: "b.json"},
	}
	bundles := []evidence.Bundle{{Key: "a.json", Integrity: evidence.IntegrityBroken}, {Key: "b.json", Integrity: evidence.IntegritySealed}}
	entries := Entries(s)
	MarkBundles(entries, bundles)
	if out := historyText(t, History{Entries: entries}); strings.Count(out, "SEAL DOES NOT VERIFY") != 1 || !strings.Contains(out, "forged: restart") {
		t.Errorf("history does not mark the one forged bundle:\n%s", out)
	}
	for _, bundle := range bundles {
		var b bytes.Buffer
		if err := bundle.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if broken := strings.Contains(b.String(), "seal: ✗ SEAL DOES NOT VERIFY"); broken != (bundle.Integrity == evidence.IntegrityBroken) {
			t.Errorf("bundle %s (%s):\n%s", bundle.Key, bundle.Integrity, b.String())
		}
	}
}
