// Package autoclock is a fake clock on which every wait returns at once, the clock
// moved on by the wait, so that a pass that samples for 90 s takes no real time:
// the backtest replays history on it, pkg/check's tests run passes on it.
package autoclock

import (
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// Clock is a FakeClock whose After fires at once by stepping the clock by the wait.
type Clock struct {
	*clocktesting.FakeClock
	// OnWait, when set, sees each wait first; returning false leaves the timer
	// pending (the waiter then waits for its context).
	OnWait func(d time.Duration) bool
}

// New is a Clock at t.
func New(t time.Time) *Clock { return &Clock{FakeClock: clocktesting.NewFakeClock(t)} }

// After returns the channel the wait fires on, having stepped the clock past it.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	if c.OnWait == nil || c.OnWait(d) {
		c.Step(d)
	}
	return ch
}
