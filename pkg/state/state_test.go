package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestRoundTrip(t *testing.T) {
	s := New()
	strong := t0.Add(-time.Minute)
	s.Pods["uid-a"] = &Pod{Name: "a", StartedAt: t0.Add(-time.Hour), FirstSeen: t0, LastSeen: t0, LastVerdict: "wedged",
		Counters: &Counters{HeartbeatOK: 5, HeartbeatRejected: 7, At: t0},
		Episode:  &OpenEpisode{Kind: "wedged", Since: t0.Add(-5 * time.Minute), Last: t0, For: Duration(5 * time.Minute), StrongSince: &strong, Evidence: "strong"}}
	s.Restarts = []Restart{{Pod: "a", UID: "uid-a", Method: "delete", ClaimedAt: t0, Outcome: RestartDone, Reason: "wedged"}}
	s.Alerts["wedged"] = &Alert{Event: "wedged", OpenedAt: t0, Sends: 1}
	s.Outbox = []Pending{{ID: "x", Event: "wedged", CreatedAt: t0, Sinks: []string{"slack"}, Payload: json.RawMessage(`{"a":1}`)}}
	s.LastRun = &Run{At: t0, Took: Duration(25 * time.Millisecond), Verdict: "wedged", Action: "restart", Outcome: "ok"}

	b, err := Encode(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"for": "5m0s"`) || !strings.Contains(string(b), fmt.Sprintf(`"version": %d`, Version)) {
		t.Errorf("document is not human-readable:\n%s", b)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := Encode(got, t0)
	if string(b) != string(b2) {
		t.Errorf("round trip changed the document:\n%s\n---\n%s", b, b2)
	}
}

func TestDecodeRecoverable(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
	}{
		{"not json", "{{{"},
		{"truncated", `{"version": 1, "pods": {`},
		{"no version", `{"pods": {}}`},
		{"version zero", `{"version": 0}`},
		{"wrong types", `{"version": 1, "pods": []}`},
		{"bad duration", `{"version": 1, "pods": {"u": {"bad": {"for": "forever"}}}}`},
		// null is not a duration: a clock of 0 would be a guess, not the document's.
		{"null duration", `{"version": 2, "pods": {"u": {"episode": {"kind": "wedged", "for": null}}}}`},
		{"null duration, version 1", `{"version": 1, "pods": {"u": {"bad": {"for": null}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc))
			if !errors.Is(err, ErrUnreadable) {
				t.Fatalf("want ErrUnreadable, got %v", err)
			}
		})
	}
	s, err := Decode([]byte("  \n"))
	if err != nil || s.Version != Version || s.Pods == nil {
		t.Fatalf("empty document must be a fresh state: %v %+v", err, s)
	}
}

// A newer document is refused, not recovered from: recovering would overwrite it and
// lose the restart budget and open claims on a rollback.
func TestDecodeRefusesNewerVersion(t *testing.T) {
	s, err := Decode([]byte(`{"version": 99, "restarts": [{"uid": "u"}]}`))
	var newer *NewerVersionError
	if !errors.As(err, &newer) || s != nil {
		t.Fatalf("want *NewerVersionError and no state, got %v, %+v", err, s)
	}
	if errors.Is(err, ErrUnreadable) {
		t.Error("a newer document must not count as unreadable (that path replaces it)")
	}
	if newer.Found != 99 || newer.Supported != Version || !strings.Contains(err.Error(), "version 99") || !strings.Contains(err.Error(), fmt.Sprintf("version %d", Version)) {
		t.Errorf("the message must name both versions: %v", err)
	}
}

func TestDecodeEmpty(t *testing.T) {
	s, err := Decode([]byte("  \n"))
	if err != nil || s.Version != Version || s.Pods == nil {
		t.Fatalf("empty document must be a fresh state: %v %+v", err, s)
	}
}

func TestDecodeDropsNullRecords(t *testing.T) {
	s, err := Decode([]byte(`{"version":1,"pods":{"u":null,"v":{"name":"v","consecutiveUnknowns":-3}},"alerts":{"x":null},"consecutiveUnknownRuns":-1}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Pods["u"]; ok || s.Pods["v"] == nil || len(s.Alerts) != 0 {
		t.Errorf("null records kept: %+v", s)
	}
}

// A duration is read only as the watchdog writes it: a number (nanoseconds) is refused.
func TestDurationReadOnlyAsWritten(t *testing.T) {
	var d Duration
	if err := json.Unmarshal([]byte(`"5m0s"`), &d); err != nil || d.D() != 5*time.Minute {
		t.Fatalf("%v %v", d, err)
	}
	if err := json.Unmarshal([]byte(`300000000000`), &d); err == nil {
		t.Fatalf("nanoseconds read as %v", d)
	}
}

func TestPruneBoundsHistory(t *testing.T) {
	s := New()
	for i := 0; i < 500; i++ {
		s.Restarts = append(s.Restarts, Restart{UID: "u", ClaimedAt: t0.Add(-time.Duration(i) * time.Minute), Outcome: RestartDone, Reason: strings.Repeat("r", 100)})
		s.Episodes = append(s.Episodes, Episode{UID: "u", From: t0, To: t0})
		s.Outbox = append(s.Outbox, Pending{ID: "p", Payload: json.RawMessage(`{}`)})
	}
	s.Restarts = append(s.Restarts, Restart{UID: "ancient", ClaimedAt: t0.Add(-30 * 24 * time.Hour)})
	b, err := Encode(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Restarts) != MaxRestarts || len(s.Episodes) != MaxEpisodes || len(s.Outbox) != MaxOutbox {
		t.Errorf("bounds not applied: %d %d %d", len(s.Restarts), len(s.Episodes), len(s.Outbox))
	}
	if !s.Restarts[len(s.Restarts)-1].ClaimedAt.Equal(t0) {
		t.Error("the newest restart must be kept")
	}
	for _, r := range s.Restarts {
		if r.UID == "ancient" {
			t.Error("restarts older than a week must go")
		}
	}
	if len(b) > maxEncodedBytes {
		t.Errorf("document is %d bytes", len(b))
	}
}

func TestEncodeShrinksOversizedDocuments(t *testing.T) {
	s := New()
	for i := 0; i < MaxRestarts; i++ {
		s.Restarts = append(s.Restarts, Restart{UID: "u", ClaimedAt: t0, Reason: strings.Repeat("x", 8<<10)})
	}
	b, err := Encode(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxEncodedBytes || len(s.Restarts) == 0 {
		t.Errorf("document %d bytes with %d restarts", len(b), len(s.Restarts))
	}
}

func TestCloneIsDeep(t *testing.T) {
	s := New()
	strong := t0
	s.Pods["u"] = &Pod{Counters: &Counters{HeartbeatRejected: 1}, Episode: &OpenEpisode{StrongSince: &strong}}
	s.Alerts["a"] = &Alert{Sends: 1}
	s.Outbox = []Pending{{Sinks: []string{"x"}, Payload: json.RawMessage(`{}`)}}
	c := s.Clone()
	c.Pods["u"].Counters.HeartbeatRejected = 9
	*c.Pods["u"].Episode.StrongSince = t0.Add(time.Hour)
	c.Alerts["a"].Sends = 9
	c.Outbox[0].Sinks[0] = "y"
	if s.Pods["u"].Counters.HeartbeatRejected != 1 || !s.Pods["u"].Episode.StrongSince.Equal(t0) || s.Alerts["a"].Sends != 1 || s.Outbox[0].Sinks[0] != "x" {
		t.Error("clone shares memory with the original")
	}
}

// An outbox of oversized alerts (a reason quoting a 64 KiB series line, say) must be
// shrunk before the restart history, which is the restart budget's ledger.
func TestEncodeShrinksTheOutboxBeforeTheRestartBudget(t *testing.T) {
	s := New()
	for i := 0; i < 3; i++ {
		s.Restarts = append(s.Restarts, Restart{UID: fmt.Sprint("u", i), ClaimedAt: t0.Add(-time.Duration(i) * time.Minute), Outcome: RestartDone})
	}
	big, _ := json.Marshal(map[string]string{"reason": strings.Repeat("x", 60<<10)})
	for i := 0; i < MaxOutbox; i++ {
		s.Outbox = append(s.Outbox, Pending{ID: fmt.Sprint("p", i), CreatedAt: t0, Payload: big})
	}
	b, err := Encode(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > maxEncodedBytes {
		t.Errorf("document is %d bytes", len(b))
	}
	if len(s.Restarts) != 3 {
		t.Errorf("restart records dropped to make room for the outbox: %d left of 3", len(s.Restarts))
	}
	if len(s.Outbox) == 0 || s.Outbox[len(s.Outbox)-1].ID != fmt.Sprint("p", MaxOutbox-1) {
		t.Errorf("the newest pending alert must be kept: %d left", len(s.Outbox))
	}
}

func TestTruncateKeepsUTF8Whole(t *testing.T) {
	s := "wedged 7m12s ≥ 4m; → restart"
	for n := 4; n <= len(s); n++ {
		got := Truncate(s, n)
		if len(got) > n || !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q (%d bytes, valid %v)", s, n, got, len(got), utf8.ValidString(got))
		}
	}
}

// A version 1 document (as v0.x watchdogs wrote it: the open episode under "bad")
// is migrated on read: nothing is lost, and it is written back as the current
// version. What no migration knows stays unreadable; a newer version is refused.
func TestDecodeMigratesVersion1(t *testing.T) {
	v1 := `{
  "version": 1,
  "pods": {
    "uid-a": {
      "name": "a", "startedAt": "2026-11-30T11:00:00Z", "firstSeen": "2026-11-30T11:00:00Z",
      "lastSeen": "2026-11-30T12:00:00Z", "lastVerdict": "wedged", "consecutiveUnknowns": 1,
      "counters": {"heartbeatOK": 5, "heartbeatRejected": 7, "at": "2026-11-30T12:00:00Z"},
      "bad": {"kind": "wedged", "since": "2026-11-30T11:55:00Z", "last": "2026-11-30T12:00:00Z", "for": "5m0s",
        "strongSince": "2026-11-30T11:59:00Z", "evidence": "strong", "baselineRejected": 3, "ready": 0, "expected": 3,
        "runSince": "2026-11-30T11:58:00Z", "run": "2026-11-30T11:58:00Z", "confirmedRun": "2026-11-30T11:50:00Z",
        "pausedSinceConfirmed": true, "confirmedRuns": 1}
    },
    "uid-b": {"name": "b", "startedAt": "2026-11-30T11:00:00Z", "firstSeen": "2026-11-30T11:00:00Z", "lastSeen": "2026-11-30T12:00:00Z", "lastVerdict": "healthy"}
  },
  "restarts": [{"pod": "c", "uid": "uid-c", "method": "delete", "claimedAt": "2026-11-30T11:00:00Z", "outcome": "done", "reason": "wedged", "evidence": "weak"}],
  "episodes": [{"pod": "c", "uid": "uid-c", "kind": "wedged", "from": "2026-11-30T10:50:00Z", "to": "2026-11-30T11:01:00Z", "outcome": "restarted"}],
  "consecutiveUnknownRuns": 2
}`
	s, err := Decode([]byte(v1))
	if err != nil {
		t.Fatal(err)
	}
	a := s.Pods["uid-a"]
	if a == nil || a.Episode == nil {
		t.Fatalf("the open episode was lost in the migration: %+v", a)
	}
	e := a.Episode
	if e.Kind != VerdictWedged || e.Evidence != EvidenceStrong || e.For.D() != 5*time.Minute || e.BaselineRejected == nil || *e.BaselineRejected != 3 ||
		e.Expected != 3 || e.RunSince == nil || e.ConfirmedRun == nil || !e.PausedSinceConfirmed || e.ConfirmedRuns != 1 ||
		!e.Since.Equal(time.Date(2026, 11, 30, 11, 55, 0, 0, time.UTC)) {
		t.Errorf("the open episode changed in the migration: %+v", e)
	}
	if a.ConsecutiveUnknowns != 1 || a.Counters == nil || a.Counters.HeartbeatRejected != 7 || s.Pods["uid-b"].Episode != nil {
		t.Errorf("pod records changed in the migration: %+v, %+v", a, s.Pods["uid-b"])
	}
	if s.ConsecutiveUnknownRuns != 2 || len(s.Restarts) != 1 || s.Restarts[0].Outcome != RestartDone || len(s.Episodes) != 1 || s.Episodes[0].Outcome != EpisodeRestarted {
		t.Errorf("the history changed in the migration: %+v %+v %d", s.Restarts, s.Episodes, s.ConsecutiveUnknownRuns)
	}
	b, err := Encode(s, t0)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), fmt.Sprintf(`"version": %d`, Version)) || strings.Contains(string(b), `"bad"`) || !strings.Contains(string(b), `"episode": {`) {
		t.Errorf("the migrated document is not written as version %d:\n%s", Version, b)
	}

	for _, doc := range []string{
		`{"version": 1, "pods": {"u": {"bad": {"for": "forever"}}}}`,
		`{"version": 1, "pods": []}`,
	} {
		if _, err := Decode([]byte(doc)); !errors.Is(err, ErrUnreadable) {
			t.Errorf("%s: want ErrUnreadable, got %v", doc, err)
		}
	}
	// A version 1 pod with both keys (a hand edit): "bad" wins, the stale "episode" goes.
	both := `{"version": 1, "pods": {"u": {"name": "u", "bad": {"kind": "wedged", "for": "1m0s"}, "episode": {"kind": "degraded", "for": "2m0s"}}}}`
	if s, err := Decode([]byte(both)); err != nil || s.Pods["u"].Episode == nil || s.Pods["u"].Episode.Kind != VerdictWedged ||
		s.Pods["u"].Episode.For.D() != time.Minute {
		t.Errorf("both bad and episode: want bad's episode, got %+v, %v", s, err)
	}
	var newer *NewerVersionError
	if _, err := Decode([]byte(fmt.Sprintf(`{"version": %d, "pods": {}}`, Version+1))); !errors.As(err, &newer) {
		t.Errorf("a newer version must be refused, got %v", err)
	}
}
