package evidence

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/decide"
)

var sealKey = []byte("0123456789abcdef0123456789abcdef")

// TestBundlesAreSealed: an editor of the evidence ConfigMap can write a bundle;
// with the outbox key the watchdog seals each one it saves, and reading them back
// tells its own (sealed) from an edited or forged one (the seal does not verify),
// one saved without a key (unsealed), and one read without the key (unchecked).
func TestBundlesAreSealed(t *testing.T) {
	cms := memoryConfigMaps{}
	k := &Keeper{ConfigMaps: cms, Namespace: "ns", ConfigMap: "evidence", Container: "scheduler", Key: sealKey}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b := k.Capture(context.Background(), decide.Target{Pod: "sched", UID: "u1", Reason: "wedged <for> 5m & more"}, decide.Observation{}, "restart", t0)
	if err := k.Save(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	load := func(key []byte) Bundle {
		t.Helper()
		got, err := Load(context.Background(), cms, "ns", "evidence", key)
		if err != nil || len(got) != 1 {
			t.Fatalf("load: %v, %d bundles", err, len(got))
		}
		return got[0]
	}
	if got := load(sealKey); got.Integrity != IntegritySealed || got.Reason != b.Reason {
		t.Errorf("the watchdog's own bundle: %q, reason %q", got.Integrity, got.Reason)
	}
	if got := load(nil); got.Integrity != IntegrityUnchecked {
		t.Errorf("read without the key: %q, want %q", got.Integrity, IntegrityUnchecked)
	}
	if got := load([]byte("another key, also thirty-two bytes")); got.Integrity != IntegrityBroken {
		t.Errorf("read with another key: %q, want %q", got.Integrity, IntegrityBroken)
	}
	// An edit of the reason, keeping the seal.
	raw := cms["evidence"].Data[b.Key]
	cms["evidence"].Data[b.Key] = strings.Replace(raw, "wedged", "healthy", 1)
	if got := load(sealKey); got.Integrity != IntegrityBroken || got.Reason == b.Reason {
		t.Errorf("an edited bundle: %q, reason %q", got.Integrity, got.Reason)
	}
	// The same sealed bundle under another key name (replayed as another restart's).
	cms["evidence"].Data = map[string]string{Key(t0.Add(time.Hour), "sched"): raw}
	if got := load(sealKey); got.Integrity != IntegrityBroken {
		t.Errorf("a bundle moved to another key: %q, want %q", got.Integrity, IntegrityBroken)
	}
	// A bundle as saved before sealing, or by a run without the key.
	plain, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	cms["evidence"].Data = map[string]string{b.Key: string(plain)}
	if got := load(sealKey); got.Integrity != IntegrityUnsealed || got.Reason != b.Reason {
		t.Errorf("an unsealed bundle: %q, reason %q", got.Integrity, got.Reason)
	}
}
