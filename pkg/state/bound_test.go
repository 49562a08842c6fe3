package state

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestEncodeIsBoundedWhateverTheInput: thousands of pods, giant reasons, payloads,
// alert keys and pod UIDs: the encoding always fits maxEncodedBytes (so the
// ConfigMap never outgrows 1 MiB and every write keeps working), decodes, and keeps
// what matters most for as long as anything does.
func TestEncodeIsBoundedWhateverTheInput(t *testing.T) {
	now := t0
	giant := strings.Repeat("é", 300<<10) // 600 KiB of two-byte characters
	current := func(s *State) {
		s.Pods["uid-current"] = &Pod{Name: "sched-current", StartedAt: now.Add(-time.Hour), FirstSeen: now.Add(-time.Hour), LastSeen: now, LastVerdict: "wedged",
			Episode: &OpenEpisode{Kind: "wedged", Since: now.Add(-3 * time.Minute), Last: now, For: Duration(3 * time.Minute), Evidence: "strong"}}
	}
	restarts := func(s *State, n int, reason string) {
		for i := range n {
			s.Restarts = append(s.Restarts, Restart{Pod: "sched", UID: fmt.Sprintf("uid-r%d", i), Method: "delete",
				ClaimedAt: now.Add(-time.Duration(n-i) * time.Minute), Outcome: RestartDone, Reason: reason})
		}
	}
	for _, tc := range []struct {
		name  string
		build func() *State
		check func(t *testing.T, s *State)
	}{
		{"5000 pods not seen this run", func() *State {
			s := New()
			for i := range 5000 {
				s.Pods[fmt.Sprintf("uid-%05d", i)] = &Pod{Name: fmt.Sprintf("agentenv-scheduler-%05d-%s", i, strings.Repeat("x", 40)),
					LastSeen: now.Add(-time.Duration(5000-i) * time.Second), LastVerdict: "unknown"}
			}
			current(s)
			restarts(s, 3, "wedged")
			return s
		}, func(t *testing.T, s *State) {
			if s.Pods["uid-current"] == nil || len(s.Restarts) != 3 {
				t.Errorf("the pod judged this run and the restart ledger must stay: current %v, %d restarts", s.Pods["uid-current"] != nil, len(s.Restarts))
			}
			if s.Pods["uid-04999"] == nil || s.Pods["uid-00000"] != nil {
				t.Error("the oldest-seen pods must go first")
			}
		}},
		{"giant reasons in a full restart ledger", func() *State {
			s := New()
			current(s)
			restarts(s, MaxRestarts, giant)
			s.LastRun = &Run{At: now, Verdict: "wedged", Reason: giant, Error: giant}
			s.Alerts["wedged"] = &Alert{Event: "wedged", OpenedAt: now}
			s.Episodes = append(s.Episodes, Episode{Pod: giant, UID: "u", Kind: "wedged", From: now, To: now, Outcome: EpisodeOutcome(giant)})
			return s
		}, func(t *testing.T, s *State) {
			if len(s.Restarts) != MaxRestarts || s.Pods["uid-current"] == nil || s.Alerts["wedged"] == nil {
				t.Errorf("cutting reasons short must be enough: %d restarts, current pod %v, alert %v", len(s.Restarts), s.Pods["uid-current"] != nil, s.Alerts["wedged"] != nil)
			}
			if r := s.Restarts[0].Reason; len(r) > maxStringBytes || !utf8.ValidString(r) || !strings.HasSuffix(r, "...") {
				t.Errorf("a cut reason is %d bytes, valid UTF-8 %v, marked %v", len(r), utf8.ValidString(r), strings.HasSuffix(r, "..."))
			}
		}},
		{"giant outbox payloads", func() *State {
			s := New()
			current(s)
			payload, _ := json.Marshal(map[string]string{"reason": giant})
			for i := range MaxOutbox {
				s.Outbox = append(s.Outbox, Pending{ID: fmt.Sprint(i), Event: "wedged", CreatedAt: now, Sinks: []string{"webhook"}, Payload: payload})
			}
			restarts(s, 2, "r")
			return s
		}, func(t *testing.T, s *State) {
			if len(s.Restarts) != 2 || s.Pods["uid-current"] == nil {
				t.Errorf("dropping payloads must be enough: %d restarts", len(s.Restarts))
			}
		}},
		{"20000 pods all seen this run, giant UIDs and alert keys", func() *State {
			s := New()
			for i := range 20000 {
				s.Pods[fmt.Sprintf("uid-%05d-%s", i, strings.Repeat("u", 100))] = &Pod{Name: "p", LastSeen: now}
			}
			s.Pods[giant] = &Pod{Name: "giant", LastSeen: now}
			for i := range 200 {
				s.Alerts[fmt.Sprintf("%d-%s", i, strings.Repeat("k", 4000))] = &Alert{Event: "x", OpenedAt: now}
			}
			restarts(s, 5, "r")
			return s
		}, func(t *testing.T, s *State) {
			if len(s.Restarts) != 5 || len(s.Pods) == 0 {
				t.Errorf("the ledger stays while pods can go: %d restarts, %d pods", len(s.Restarts), len(s.Pods))
			}
		}},
		{"giant restart UIDs: even the ledger goes, last", func() *State {
			s := New()
			for i := range MaxRestarts {
				s.Restarts = append(s.Restarts, Restart{UID: fmt.Sprintf("%d-%s", i, strings.Repeat("u", 10<<10)), ClaimedAt: now.Add(-time.Duration(MaxRestarts-i) * time.Second)})
			}
			s.LastRun = &Run{At: now, Reason: giant}
			return s
		}, func(t *testing.T, s *State) {
			if len(s.Restarts) == 0 || s.Restarts[len(s.Restarts)-1].UID[:3] != "99-" {
				t.Errorf("the newest restarts are kept as long as anything is: %d kept", len(s.Restarts))
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.build()
			b, err := Encode(s, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > maxEncodedBytes {
				t.Fatalf("encoded %d bytes > %d", len(b), maxEncodedBytes)
			}
			back, err := Decode(b)
			if err != nil {
				t.Fatalf("the bounded document does not decode: %v", err)
			}
			if b2, _ := Encode(back, now); string(b2) != string(b) {
				t.Error("the bounded document changes when written again")
			}
			tc.check(t, s)
			t.Logf("%d bytes: %d pods, %d restarts, %d episodes, %d alerts, %d pending", len(b), len(s.Pods), len(s.Restarts), len(s.Episodes), len(s.Alerts), len(s.Outbox))
		})
	}
}

func TestBoundCorrupt(t *testing.T) {
	if got := BoundCorrupt("{not json"); got != "{not json" {
		t.Errorf("a small unreadable document must be kept whole: %q", got)
	}
	big := strings.Repeat("x", 2<<20)
	got := BoundCorrupt(big)
	if len(got) > maxCorruptBytes || !strings.Contains(got, fmt.Sprintf("of %d bytes kept", len(big))) {
		t.Errorf("kept %d bytes (bound %d), note %q", len(got), maxCorruptBytes, got[len(got)-60:])
	}
}
