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
