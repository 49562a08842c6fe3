package cli

import (
	"context"

	"k8s.io/utils/clock"
)

type clockKey struct{}

// WithClock returns ctx carrying the clock that `watchdog check` runs its pass on
// (the samples' cadence, the run's deadline, the times it records) instead of the
// real one. Tests replay runs on a virtual clock against a real API server, where
// only what they inject takes time, so that what they prove does not depend on how
// loaded the machine is. Nothing else sets it.
func WithClock(ctx context.Context, clk clock.Clock) context.Context {
	return context.WithValue(ctx, clockKey{}, clk)
}

// clockOf is the clock WithClock put in ctx, or the real one.
func clockOf(ctx context.Context) clock.Clock {
	if clk, ok := ctx.Value(clockKey{}).(clock.Clock); ok {
		return clk
	}
	return clock.RealClock{}
}
