package check

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// What a pass uses, as small interfaces where they are consumed: the CLI wires the
// real types, the unit tests and the backtest in-memory fakes.

// Observer takes the observations of a pass.
type Observer interface {
	// Observe lists from the watch cache; an error means nothing can be judged.
	Observe(ctx context.Context) (decide.Observation, error)
	// ObserveConsistent is Observe with quorum lists, the last look before a restart.
	ObserveConsistent(ctx context.Context) (decide.Observation, error)
	// Rollout reads the Deployment for the rollout gate and the pods' owner chains
	// for the rollout method (read errors are in the result).
	Rollout(ctx context.Context, pods ...decide.Pod) *decide.Rollout
}

// Store loads and saves the state with optimistic concurrency: Save from a
// snapshot older than the stored version fails with an error wrapping
// statestore.ErrConflict; on success the snapshot moves to the written version.
type Store interface {
	Load(ctx context.Context) (*statestore.Snapshot, error)
	Save(ctx context.Context, snap *statestore.Snapshot, s *state.State, now time.Time) error
}

// EventRecorder leaves Kubernetes Events.
type EventRecorder interface {
	Emit(ctx context.Context, obj corev1.ObjectReference, eventType, reason, message string) error
}
