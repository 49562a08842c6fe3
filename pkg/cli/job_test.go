package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A run ends JobKillMargin before its Job's deadline when that comes first; the
// Job's scheduled minute is read from the name the CronJob controller gives it,
// and a name that does not carry a plausible one changes nothing.
func TestJobDeadline(t *testing.T) {
	scheduled := time.Date(2026, 12, 1, 12, 5, 0, 0, time.UTC)
	name := fmt.Sprintf("agentenv-scheduler-watchdog-%d", scheduled.Unix()/60)
	const timeout, active = 3 * time.Minute, 270 * time.Second
	for _, tc := range []struct {
		name    string
		job     JobOptions
		late    time.Duration
		want    time.Time // zero: start + timeout
		wantLat time.Duration
	}{
		{name: "on time", job: JobOptions{Name: name, ActiveDeadline: active}, late: 5 * time.Second, wantLat: 5 * time.Second},
		{name: "60 s late still has its timeout", job: JobOptions{Name: name, ActiveDeadline: active}, late: 60 * time.Second, wantLat: 60 * time.Second},
		{name: "95 s late", job: JobOptions{Name: name, ActiveDeadline: active}, late: 95 * time.Second, want: scheduled.Add(active - JobKillMargin), wantLat: 95 * time.Second},
		{name: "120 s late", job: JobOptions{Name: name, ActiveDeadline: active}, late: 120 * time.Second, want: scheduled.Add(active - JobKillMargin), wantLat: 120 * time.Second},
		{name: "deadline unknown", job: JobOptions{Name: name}, late: 120 * time.Second},
		{name: "a Job created by hand", job: JobOptions{Name: "watchdog-manual-run", ActiveDeadline: active}, late: 120 * time.Second},
		{name: "a number that is no schedule", job: JobOptions{Name: "watchdog-manual-42", ActiveDeadline: active}, late: 120 * time.Second},
		{name: "a schedule in the future", job: JobOptions{Name: fmt.Sprintf("wd-%d", scheduled.Unix()/60+10), ActiveDeadline: active}, late: 120 * time.Second},
		{name: "a schedule whose Job must be gone", job: JobOptions{Name: name, ActiveDeadline: active}, late: active + time.Second},
		{name: "no dash", job: JobOptions{Name: fmt.Sprint(scheduled.Unix() / 60), ActiveDeadline: active}, late: 120 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := scheduled.Add(tc.late)
			got, late, capped := tc.job.Deadline(start, timeout)
			want := tc.want
			if want.IsZero() {
				want = start.Add(timeout)
			}
			if !got.Equal(want) || capped != !tc.want.IsZero() || late != tc.wantLat {
				t.Errorf("deadline %s (capped %t, late %s), want %s (late %s)", got.Sub(scheduled), capped, late, want.Sub(scheduled), tc.wantLat)
			}
		})
	}
}

func TestJobOptionsValidate(t *testing.T) {
	if err := (&JobOptions{ActiveDeadline: 20 * time.Second}).Validate(); err == nil || !strings.Contains(err.Error(), "--job-active-deadline") {
		t.Errorf("a deadline shorter than the margin: %v", err)
	}
	for _, d := range []time.Duration{0, 270 * time.Second} {
		if err := (&JobOptions{ActiveDeadline: d}).Validate(); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
}
