package check

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// What a pass uses: the CLI wires the real types, the unit tests and the backtest fakes.

// Observer takes the observations of a pass: Observe lists from the watch cache (an
// error: nothing can be judged), ObserveConsistent with quorum lists (the last look
// before a restart); Rollout reads the Deployment and the pods' owner chains, errors in the result.
type Observer interface {
	Observe(ctx context.Context) (decide.Observation, error)
	ObserveConsistent(ctx context.Context) (decide.Observation, error)
	Rollout(ctx context.Context, pods ...decide.Pod) *decide.Rollout
}

// Store loads and saves the state: Save from a snapshot older than the stored version
// fails with statestore.ErrConflict; on success the snapshot moves to the written one.
type Store interface {
	Load(ctx context.Context) (*statestore.Snapshot, error)
	Save(ctx context.Context, snap *statestore.Snapshot, s *state.State, now time.Time) error
}

// EventRecorder leaves Kubernetes Events.
type EventRecorder interface {
	Emit(ctx context.Context, obj corev1.ObjectReference, eventType, reason, message string) error
}
