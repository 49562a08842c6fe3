package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzDecode feeds arbitrary stored documents to Decode (version check, migration,
// null records dropped) and what it accepts to Encode. Seeds: the documents of this package's
// tests, a realistic document, and testdata/fuzz/FuzzDecode (kept interesting inputs).
//
//	go test ./pkg/state -run '^$' -fuzz '^FuzzDecode$' -fuzztime 10m -parallel 1
//
// Properties: Decode never panics; every error wraps ErrUnreadable or is a
// *NewerVersionError; an accepted
// document has no null record, deep-clones to the same document, encodes without error
// (a document the watchdog read must be one it can write back), and re-encoding
// what the encoding decodes to gives the same bytes (round trip); the histories are
// within their bounds and the encoding within maxEncodedBytes, always.
func FuzzDecode(f *testing.F) {
	for _, doc := range seedDocuments(f) {
		f.Add(doc)
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := Decode(doc)
		if err != nil {
			var newer *NewerVersionError
			if !errors.Is(err, ErrUnreadable) && !errors.As(err, &newer) {
				t.Fatalf("error neither wraps ErrUnreadable nor is a newer version: %v", err)
			}
			if s != nil {
				t.Fatalf("an error came with a state: %+v", s)
			}
			return
		}
		if s == nil {
			t.Fatal("no error and no state")
		}
		checkDecoded(t, s)

		now := fuzzNow
		clone := s.Clone()
		b1, err := Encode(s, now)
		if err != nil {
			t.Fatalf("a decoded document does not encode: %v\ninput: %q", err, doc)
		}
		cb, err := Encode(clone, now)
		if err != nil || !bytes.Equal(b1, cb) {
			t.Fatalf("the clone encodes differently (%v):\n%s\n---\n%s", err, b1, cb)
		}
		checkBounds(t, s, b1)

		s2, err := Decode(b1)
		if err != nil {
			t.Fatalf("the encoding does not decode: %v\n%s", err, b1)
		}
		checkDecoded(t, s2)
		b2, err := Encode(s2, now)
		if err != nil {
			t.Fatalf("the round-tripped document does not encode: %v", err)
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("round trip changed the document:\n%s\n---\n%s", b1, b2)
		}
	})
}

// fuzzNow is the encoding time: a fixed one keeps every run deterministic.
var fuzzNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func checkDecoded(t *testing.T, s *State) {
	t.Helper()
	if s.Version != Version || s.Pods == nil || s.Alerts == nil {
		t.Fatalf("not a version-%d state with its maps: version %d, pods nil %v, alerts nil %v",
			Version, s.Version, s.Pods == nil, s.Alerts == nil)
	}
	for uid, p := range s.Pods {
		if p == nil {
			t.Fatalf("pod %q is nil", uid)
		}
	}
	for ev, a := range s.Alerts {
		if a == nil {
			t.Fatalf("alert %q is nil", ev)
		}
	}
}

func checkBounds(t *testing.T, s *State, b []byte) {
	t.Helper()
	if len(s.Restarts) > MaxRestarts || len(s.Episodes) > MaxEpisodes || len(s.Outbox) > MaxOutbox {
		t.Fatalf("histories over their bounds: %d restarts, %d episodes, %d pending", len(s.Restarts), len(s.Episodes), len(s.Outbox))
	}
	for _, r := range s.Restarts {
		if fuzzNow.Sub(r.ClaimedAt) > MaxHistoryAge {
			t.Fatalf("restart claimed at %s kept past %s", r.ClaimedAt, MaxHistoryAge)
		}
	}
	if len(b) > maxEncodedBytes {
		t.Fatalf("encoding is %d bytes (> %d)", len(b), maxEncodedBytes)
	}
}

// seedDocuments are stored documents as the watchdog writes them, as people may
// edit them, and the unreadable ones of TestDecodeRecoverable.
func seedDocuments(tb testing.TB) [][]byte {
	s := New()
	strong := fuzzNow.Add(-2 * time.Minute)
	baseline := uint64(11)
	sent := fuzzNow.Add(-time.Minute)
	done := fuzzNow.Add(-time.Hour + time.Second)
	s.UpdatedAt = fuzzNow
	s.Pods["0b8c6f2e-1111-4c1e-9d55-3f1f7a6c2a10"] = &Pod{Name: "agentenv-scheduler-7d9f8b6c5-x2k4p",
		StartedAt: fuzzNow.Add(-26 * time.Hour), FirstSeen: fuzzNow.Add(-25 * time.Hour), LastSeen: fuzzNow, LastVerdict: "wedged",
		ConsecutiveUnknowns: 1, Counters: &Counters{HeartbeatOK: 2160, HeartbeatRejected: 14, At: fuzzNow},
		Episode: &OpenEpisode{Kind: "wedged", Since: fuzzNow.Add(-5 * time.Minute), Last: fuzzNow, For: Duration(5 * time.Minute),
			StrongSince: &strong, Evidence: "strong", BaselineRejected: &baseline, Ready: 0, Expected: 3}}
	s.Restarts = []Restart{
		{Pod: "agentenv-scheduler-7d9f8b6c5-abcde", UID: "u-old", Method: "delete", ClaimedAt: fuzzNow.Add(-time.Hour), Outcome: RestartDone, DoneAt: &done, Reason: "wedged for 4m0s", Evidence: "strong"},
		{Pod: "agentenv-scheduler-7d9f8b6c5-fghij", UID: "u-f", Method: "rollout", ClaimedAt: fuzzNow.Add(-30 * time.Minute), Outcome: RestartFailed, Reason: "wedged", Error: "forbidden"},
	}
	s.Episodes = []Episode{{Pod: "p", UID: "u-old", Kind: "wedged", Evidence: "weak", From: fuzzNow.Add(-2 * time.Hour), To: fuzzNow.Add(-time.Hour), Outcome: "restarted"}}
	s.Alerts["wedged"] = &Alert{Event: "wedged", OpenedAt: fuzzNow.Add(-5 * time.Minute), LastSentAt: &sent, Sends: 2, Pod: "p"}
	s.Outbox = []Pending{{ID: "wedged-1", Event: "wedged", CreatedAt: fuzzNow, Attempts: 1, Sinks: []string{"slack", "webhook"}, LastError: "webhook: HTTP 503", Payload: json.RawMessage(`{"event":"wedged","test":false,"n":[1,2.5,null]}`)}}
	s.ConsecutiveUnknownRuns = 2
	s.LastRun = &Run{At: fuzzNow, Took: Duration(47 * time.Millisecond), Verdict: "wedged", Action: "restart", Reason: "r", Outcome: "ok", Watchdog: "v0.1.0"}
	full, err := Encode(s, fuzzNow)
	if err != nil {
		tb.Fatal(err)
	}
	fresh, err := Encode(New(), fuzzNow)
	if err != nil {
		tb.Fatal(err)
	}
	docs := [][]byte{full, fresh, bytes.ReplaceAll(full, []byte("\n"), nil)}
	for _, d := range []string{
		"", "  \n", "{{{", `{"version": 1, "pods": {`, `{"pods": {}}`, `{"version": 99}`, `{"version": 0}`,
		`{"version": 1, "pods": []}`, `{"version": 1, "pods": {"u": {"bad": {"for": "forever"}}}}`,
		`{"version":1,"pods":{"u":null,"v":{"name":"v","consecutiveUnknowns":-3}},"alerts":{"x":null},"consecutiveUnknownRuns":-1}`,
		`{"version":1,"pods":{"u":{"bad":{"for":300000000000}}},"lastRun":{"took":-1}}`,
		`{"version":1,"outbox":[{"id":"a","payload":null},{"id":"b"}],"restarts":[{"claimedAt":"2026-11-30T23:00:00+01:00"}]}`,
		strings.Replace(string(full), `"version": 1`, `"version": 1.0`, 1),
	} {
		docs = append(docs, []byte(d))
	}
	return docs
}
