package chart

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// shortestGap is the shortest gap between two runs of a schedule as the CronJob
// controller computes run times (robfig/cron's standard parser), over eight days.
func shortestGap(t *testing.T, spec string) time.Duration {
	t.Helper()
	s, err := cron.ParseStandard(spec)
	must(t, err)
	start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC) // a Monday
	gap := time.Duration(1<<63 - 1)
	prev := s.Next(start)
	for next := s.Next(prev); next.Before(start.AddDate(0, 0, 8)); prev, next = next, s.Next(next) {
		gap = min(gap, next.Sub(prev))
	}
	return gap
}

// TestScheduleIntervalAnySpelling: a Job deadline as long as the schedule's interval
// is refused and one second shorter accepted, for the interval the CronJob
// controller really runs at, however the schedule spells it ("* * * * *" is
// "*/1 * * * *"; "*/7" runs 4 minutes apart across the hour).
func TestScheduleIntervalAnySpelling(t *testing.T) {
	// Short enough that a deadline under a one-minute interval still exceeds it.
	const base = "run: {timeout: 30s}\ndecision: {confirmWindow: 20s}\nscheduler: {scrapeTimeout: 5s}\n"
	for _, c := range []struct {
		spec string
		// restricted: days are restricted, and the chart counts the gap across
		// midnight as a day even where the next day does not run.
		restricted time.Duration
	}{
		{spec: "* * * * *"},
		{spec: "*/1 * * * *"},
		{spec: "0-59 * * * *"},
		{spec: "0-59/1 *  *  * *"},
		{spec: "*/2 * * * *"},
		{spec: "0/5 * * * *"},
		{spec: "*/5 * * * *"},
		{spec: "1-59/5 * * * *"},
		{spec: "*/7 * * * *"},
		{spec: "0,30 * * * *"},
		{spec: "0,10,50 * * * *"},
		{spec: "5,6 * * * *"},
		{spec: "0 * * * *"},
		{spec: "@hourly"},
		{spec: "*/20 */2 * * *"},
		{spec: "59 */2 * * *"},
		{spec: "0,1 0 * * *"},
		{spec: "0 0,23 * * *"},
		{spec: "*/15 9-17 * * 1-5"},
		{spec: "* 3 * * 0"},
		{spec: "@daily"},
		{spec: "@weekly", restricted: 24 * time.Hour},
		{spec: "0 0 1 * *", restricted: 24 * time.Hour},
	} {
		t.Run(c.spec, func(t *testing.T) {
			want := shortestGap(t, c.spec)
			if c.restricted > 0 {
				if c.restricted > want {
					t.Fatalf("the chart's reading %s is longer than the real interval %s", c.restricted, want)
				}
				want = c.restricted
			}
			secs := int64(want / time.Second)
			values := func(deadline int64) string {
				return base + fmt.Sprintf("cronjob: {schedule: %q, activeDeadlineSeconds: %d}\n", c.spec, deadline)
			}
			_, err := renderErr(t, values(secs))
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("as often as every %ds", secs)) {
				t.Errorf("deadline %ds, interval %s: want refused naming the interval, got %v", secs, want, err)
			}
			if _, err := renderErr(t, values(secs-1)); err != nil {
				t.Errorf("deadline %ds, interval %s: refused: %v", secs-1, want, err)
			}
		})
	}
}

// TestScheduleUnreadable: a schedule the chart cannot read is refused with the field
// named, never passed on unchecked.
func TestScheduleUnreadable(t *testing.T) {
	for spec, want := range map[string]string{
		"*/0 * * * *":   "minute field",
		"60 * * * *":    "minute field",
		"0 24 * * *":    "hour field",
		"5-1 * * * *":   "minute field",
		"H * * * *":     "minute field",
		"0 0 * * * *":   "schedule",
		"1,,2 * * * *":  "minute field",
		"*/5 x-y * * *": "hour field",
	} {
		_, err := renderErr(t, fmt.Sprintf("cronjob: {schedule: %q}", spec))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("schedule %q: want refused naming the %s, got %v", spec, want, err)
		}
	}
}
