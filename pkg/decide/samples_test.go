package decide_test

import (
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/decide"
)

// TestSamplesOn: the pass samples on while the sample SampleFor asks for, at
// SampleFor rounded up to a whole number of intervals and at least one interval
// away, fits in the time left; never without a SampleFor.
func TestSamplesOn(t *testing.T) {
	ptr := func(d time.Duration) *time.Duration { return &d }
	for _, c := range []struct {
		sampleFor         *time.Duration
		interval, atLeast time.Duration // atLeast: the least left that samples on
	}{
		{ptr(0), 15 * time.Second, 15 * time.Second},
		{ptr(-time.Second), 15 * time.Second, 15 * time.Second},
		{ptr(time.Second), 15 * time.Second, 15 * time.Second},
		{ptr(15 * time.Second), 15 * time.Second, 15 * time.Second},
		{ptr(16 * time.Second), 15 * time.Second, 30 * time.Second},
		{ptr(75 * time.Second), 15 * time.Second, 75 * time.Second},
		{ptr(16 * time.Second), 10 * time.Second, 20 * time.Second},
		{ptr(16 * time.Second), 0, 16 * time.Second},
	} {
		tg := decide.Target{SampleFor: c.sampleFor}
		if !tg.SamplesOn(c.interval, c.atLeast) || tg.SamplesOn(c.interval, c.atLeast-time.Nanosecond) {
			t.Errorf("SampleFor %s, interval %s: want sampling on from %s left exactly", *c.sampleFor, c.interval, c.atLeast)
		}
	}
	if (decide.Target{}).SamplesOn(decide.DefaultSampleInterval, time.Hour) {
		t.Error("sampling on without a SampleFor")
	}
}
