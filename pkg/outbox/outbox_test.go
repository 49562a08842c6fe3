package outbox

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// TestRebuild: a kept entry opens authenticated under its key and is rebuilt with
// the configuration's labels (--alert-labels), namespace and version and the event
// table's severity, not what it carried; a changed fact, or another key, is
// refused as unsealed. The forgeries a state editor could write are in
// pkg/deliver's outbox tests, through the dispatcher's retry.
func TestRebuild(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	n := alert.Notification{ID: "0123456789abcdef", Event: alert.EventWedged, Severity: "low", Namespace: "elsewhere", Pod: "p", Time: now,
		Labels: map[string]string{"team": "then", "severity": "low"}}
	c := Config{Key: []byte("k"), Source: alert.Source{Namespace: "agentenv-system", Version: "v2", Labels: map[string]string{"team": "now"}}}
	p, err := c.Pending(n, now, []string{"webhook"}, "")
	if err != nil {
		t.Fatal(err)
	}
	got, authenticated, err := c.Open(p, now)
	if err != nil || !authenticated || len(got.Labels) != 1 || got.Labels["team"] != "now" || got.Severity != alert.SeverityCritical ||
		got.Namespace != c.Source.Namespace || got.Watchdog != c.Source.Version || got.Pod != "p" {
		t.Errorf("rebuilt %+v (authenticated %v, %v)", got, authenticated, err)
	}

	changed := p
	changed.Payload = bytes.Replace(p.Payload, []byte(`"pod":"p"`), []byte(`"pod":"q"`), 1)
	if bytes.Equal(changed.Payload, p.Payload) {
		t.Fatalf("the payload names no pod: %s", p.Payload)
	}
	other := c
	other.Key = []byte("another key")
	for name, tc := range map[string]struct {
		c Config
		p state.Pending
	}{"a changed fact": {c, changed}, "another key": {other, p}} {
		if _, _, err := tc.c.Open(tc.p, now); !errors.Is(err, errUnsealed) {
			t.Errorf("%s: %v, want it refused as unsealed", name, err)
		}
	}
}

// An entry a later build sealed may carry a fact this build does not know (as
// `paused` was to the build before the pause): rolled back to, this build retries
// the alert without it rather than dropping it, once its seal, over the payload as
// that build wrote it, verifies. Stored and read back through the state document,
// which re-indents the payload. Checked before: dropped as "not a notification as
// the watchdog writes one". Without a key, or with a seal that does not cover the
// field, it is still refused.
func TestSealedFactOfALaterBuildIsRetriedWithoutIt(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	c := Config{Key: []byte("k"), Source: alert.Source{Namespace: "agentenv-system"}}
	n := alert.Notification{ID: "0123456789abcdef", Event: alert.EventWedged, Pod: "p", Reason: "wedged", Time: now}
	p, err := c.Pending(n, now, []string{"webhook"}, "")
	if err != nil {
		t.Fatal(err)
	}
	later := p
	later.Payload = bytes.Replace(p.Payload, []byte(`{`), []byte(`{"escalation":"team-b",`), 1)
	later.Seal = c.Seal(later, later.Payload)
	s := state.New()
	s.Outbox = append(s.Outbox, later)
	doc, err := state.Encode(s, now)
	if err != nil {
		t.Fatal(err)
	}
	read, err := state.Decode(doc)
	if err != nil || len(read.Outbox) != 1 || bytes.Equal(read.Outbox[0].Payload, later.Payload) {
		t.Fatalf("the entry did not come back re-indented (%v): the test proves nothing", err)
	}
	stored := read.Outbox[0]
	got, authenticated, err := c.Open(stored, now)
	if err != nil || !authenticated || got.Pod != "p" || got.Reason != "wedged" || got.Severity != alert.SeverityCritical {
		t.Errorf("rebuilt %+v (authenticated %v, %v): want the alert retried", got, authenticated, err)
	}
	forged, noSeal := stored, stored
	forged.Seal, noSeal.Seal = p.Seal, ""
	for name, tc := range map[string]struct {
		c Config
		p state.Pending
	}{"without a key": {Config{Source: c.Source}, stored}, "a seal without the fact": {c, forged}, "no seal": {c, noSeal}} {
		if _, _, err := tc.c.Open(tc.p, now); err == nil {
			t.Errorf("%s: an unknown field accepted", name)
		}
	}
}
