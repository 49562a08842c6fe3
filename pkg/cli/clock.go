package cli

import (
	"context"

	"k8s.io/utils/clock"
)

type clockKey struct{}

// WithClock returns ctx carrying the clock `watchdog check` runs its pass on instead
// of the real one: tests replay runs on a virtual clock against a real API server,
// so what they prove does not depend on how loaded the machine is.
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
