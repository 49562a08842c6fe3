package backtest

import (
	"testing"
	"time"

	"github.com/prometheus/common/model"
)

// TestDisagreements: two scrapes of one pod disagree only where one reads
// something the other's samples on both sides, within their staleness, do not:
// neither a change that falls between two scrapes nor a reading in the other's
// gap is a disagreement.
func TestDisagreements(t *testing.T) {
	every := func(offset time.Duration, v func(time.Time) float64) []model.SamplePair {
		return series(t0.Add(offset), t0.Add(time.Hour), 15*time.Second, func(t time.Time) (float64, bool) { return v(t), true })
	}
	zeroFrom := func(at time.Duration) func(time.Time) float64 { return wedgedIn([2]time.Duration{at, 2 * time.Hour}) }
	a, three := every(0, zeroFrom(20*time.Minute)), every(0, func(time.Time) float64 { return 3 })
	for _, tc := range []struct {
		name string
		a, b []model.SamplePair
		want int // spans
	}{
		{"the same readings 5 s later", a, every(5*time.Second, zeroFrom(20*time.Minute)), 0},
		{"the change seen between two of a's scrapes", a, every(5*time.Second, zeroFrom(20*time.Minute-10*time.Second)), 0},
		{"0 for ten minutes while a reads 3", three, every(5*time.Second, wedgedIn([2]time.Duration{5 * time.Minute, 15 * time.Minute})), 1},
	} {
		if got := disagreements(tc.a, tc.b, 30*time.Second); len(got) != tc.want {
			t.Errorf("%s: spans %v, want %d", tc.name, got, tc.want)
		}
	}
	// b reads 0 while a has no sample for ten minutes: b's reading is the only one.
	gap := without(&History{Ready: []*model.SampleStream{stream(pod1, three)}}, 5*time.Minute, 15*time.Minute).Ready[0].Values
	if got := disagreements(gap, every(5*time.Second, wedgedIn([2]time.Duration{6 * time.Minute, 14 * time.Minute})), 30*time.Second); len(got) != 0 {
		t.Errorf("a reading inside the other's gap: spans %v, want none", got)
	}
}
