package backtest

import (
	"encoding/json"
	"slices"
	"strings"
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

// TestStartTimeInMillisecondsIsUnknown: a process_start_time_seconds exported in
// milliseconds is no time (year > 9999, which JSON cannot encode): the replay
// ignores it, takes the pod's age from its first sample and says so.
func TestStartTimeInMillisecondsIsUnknown(t *testing.T) {
	h := history(time.Hour, wedgedIn([2]time.Duration{12 * time.Minute, time.Hour}), noRejections)
	h.StartTime = []*model.SampleStream{stream(pod1, series(t0, t0.Add(time.Hour), 15*time.Second, always(float64(t0.UnixMilli()))))}
	res := replay(t, h, config())
	if _, err := json.Marshal(res); err != nil || len(res.Restarts) != 1 {
		t.Fatalf("the report: %v; restarts %+v, want one", err, res.Restarts)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "process_start_time_seconds samples") }) ||
		!slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "age is taken from its first sample") }) {
		t.Errorf("warnings %q: want the ignored start times and the age's source", res.Warnings)
	}
}
