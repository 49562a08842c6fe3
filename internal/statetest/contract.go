// Package statetest holds the contract every state store keeps, run against the
// ConfigMap store on a real API server (test/integration) and against
// statestore.MemoryStore (pkg/state), so that tests using the memory store test
// against the semantics production has.
package statetest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// Store is what the contract exercises.
type Store interface {
	Load(ctx context.Context) (*statestore.Snapshot, error)
	Save(ctx context.Context, snap *statestore.Snapshot, s *state.State, now time.Time) error
}

// Subject is one store under test, empty (its ConfigMap does not exist).
type Subject struct {
	Store Store
	// SetData overwrites the stored ConfigMap's data behind the store's back (as
	// kubectl edit would), creating it if needed.
	SetData func(data map[string]string)
	// Data reads the stored ConfigMap's data.
	Data func() map[string]string
}

// Contract runs the store contract; newSubject gives a fresh, empty store each time.
func Contract(t *testing.T, newSubject func(t *testing.T) Subject) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	doc := func(pod string) *state.State {
		s := state.New()
		s.Restarts = append(s.Restarts, state.Restart{Pod: pod, UID: "uid-" + pod, Method: "delete", ClaimedAt: now, Outcome: state.RestartClaimed})
		return s
	}
	load := func(t *testing.T, st Store) *statestore.Snapshot {
		t.Helper()
		snap, err := st.Load(ctx)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		return snap
	}

	t.Run("missing is empty, then created", func(t *testing.T) {
		sub := newSubject(t)
		snap := load(t, sub.Store)
		if snap.ResourceVersion != "" || snap.Recovered == "" || len(snap.State.Restarts) != 0 {
			t.Fatalf("missing state: rv %q recovered %q restarts %d", snap.ResourceVersion, snap.Recovered, len(snap.State.Restarts))
		}
		s := doc("a")
		if err := sub.Store.Save(ctx, snap, s, now); err != nil {
			t.Fatalf("create: %v", err)
		}
		if snap.ResourceVersion == "" || snap.State != s {
			t.Errorf("the snapshot did not move to the written version: rv %q", snap.ResourceVersion)
		}
		got := load(t, sub.Store)
		if got.ResourceVersion != snap.ResourceVersion || got.Recovered != "" || len(got.State.Restarts) != 1 || got.State.Restarts[0].Pod != "a" || !got.State.UpdatedAt.Equal(now) {
			t.Fatalf("read back rv %q (wrote %q) recovered %q %+v", got.ResourceVersion, snap.ResourceVersion, got.Recovered, got.State)
		}
		// The snapshot that wrote can write again.
		if err := sub.Store.Save(ctx, snap, doc("b"), now.Add(time.Second)); err != nil {
			t.Fatalf("second write from the same snapshot: %v", err)
		}
	})

	t.Run("stale resourceVersion conflicts", func(t *testing.T) {
		sub := newSubject(t)
		first := load(t, sub.Store)
		if err := sub.Store.Save(ctx, first, doc("seed"), now); err != nil {
			t.Fatal(err)
		}
		ours, theirs := load(t, sub.Store), load(t, sub.Store)
		if err := sub.Store.Save(ctx, theirs, doc("theirs"), now); err != nil {
			t.Fatalf("their write: %v", err)
		}
		err := sub.Store.Save(ctx, ours, doc("ours"), now)
		if !errors.Is(err, statestore.ErrConflict) {
			t.Fatalf("a write from a stale snapshot: %v, want ErrConflict", err)
		}
		if got := load(t, sub.Store); got.State.Restarts[0].Pod != "theirs" {
			t.Fatalf("the losing write changed the state: %+v", got.State.Restarts)
		}
		// After re-reading, the write goes through.
		ours = load(t, sub.Store)
		if err := sub.Store.Save(ctx, ours, doc("ours"), now); err != nil {
			t.Fatalf("write after re-reading: %v", err)
		}
	})

	t.Run("racing creates conflict", func(t *testing.T) {
		sub := newSubject(t)
		a, b := load(t, sub.Store), load(t, sub.Store)
		if err := sub.Store.Save(ctx, a, doc("a"), now); err != nil {
			t.Fatal(err)
		}
		if err := sub.Store.Save(ctx, b, doc("b"), now); !errors.Is(err, statestore.ErrConflict) {
			t.Fatalf("second create: %v, want ErrConflict", err)
		}
	})

	t.Run("an edit behind the store's back conflicts", func(t *testing.T) {
		sub := newSubject(t)
		snap := load(t, sub.Store)
		if err := sub.Store.Save(ctx, snap, doc("a"), now); err != nil {
			t.Fatal(err)
		}
		// An edit that changes nothing leaves the version (the API server makes
		// no new resourceVersion for it): no conflict.
		sub.SetData(sub.Data())
		if err := sub.Store.Save(ctx, snap, doc("b"), now); err != nil {
			t.Fatalf("write after an edit that changed nothing: %v", err)
		}
		data := sub.Data()
		data["edited-by"] = "kubectl"
		sub.SetData(data)
		if err := sub.Store.Save(ctx, snap, doc("c"), now); !errors.Is(err, statestore.ErrConflict) {
			t.Fatalf("write over an edited ConfigMap: %v, want ErrConflict", err)
		}
	})

	// A null wedge clock is as unreadable as broken JSON: read as 0 it would be a guess.
	for _, bad := range []string{"{not json", `{"version": 2, "pods": {"u": {"name": "a", "episode": {"kind": "wedged", "for": null}}}}`} {
		t.Run("unreadable document is recovered and kept", func(t *testing.T) {
			sub := newSubject(t)
			sub.SetData(map[string]string{statestore.DataKey: bad})
			snap := load(t, sub.Store)
			if !strings.Contains(snap.Recovered, "unreadable") || snap.ResourceVersion == "" {
				t.Fatalf("recovered %q rv %q", snap.Recovered, snap.ResourceVersion)
			}
			if err := sub.Store.Save(ctx, snap, doc("a"), now); err != nil {
				t.Fatal(err)
			}
			if got := sub.Data()[statestore.CorruptKey]; got != bad {
				t.Fatalf("the unreadable document was not kept under %s: %q", statestore.CorruptKey, got)
			}
		})
	}

	t.Run("newer version is refused", func(t *testing.T) {
		sub := newSubject(t)
		sub.SetData(map[string]string{statestore.DataKey: `{"version": 99}`})
		var newer *state.NewerVersionError
		if _, err := sub.Store.Load(ctx); !errors.As(err, &newer) {
			t.Fatalf("load of a newer document: %v, want *NewerVersionError", err)
		}
	})
}
