package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// JobOptions tell a check which CronJob run it is, so that it ends before the
// Job's activeDeadlineSeconds even when its pod started late. --timeout counts
// from the process's start; activeDeadlineSeconds from the Job's start, and it
// must also cover scheduling, the image pull and start-up.
type JobOptions struct {
	// Name is the Job's name; the chart sets it from the pod's
	// batch.kubernetes.io/job-name label (the downward API).
	Name string
	// ActiveDeadline is the Job's activeDeadlineSeconds; zero is unknown.
	ActiveDeadline time.Duration
}

// JobKillMargin is what a run keeps between its own deadline and the Job's: time
// to report a failure and record it (the budgets pkg/check gives a failing pass
// for each, which this must exceed) and exit, before the Job controller's SIGTERM.
const JobKillMargin = 30 * time.Second

func (o *JobOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Name, "job-name", "", "name of the CronJob's Job this run is (the chart sets it); with --job-active-deadline, the run ends before the Job's deadline however late its pod started")
	fs.DurationVar(&o.ActiveDeadline, "job-active-deadline", 0, "the Job's activeDeadlineSeconds, as a duration (0: unknown)")
}

func (o *JobOptions) Validate() error {
	var p problems
	if o.ActiveDeadline != 0 && o.ActiveDeadline <= JobKillMargin {
		p.addf("--job-active-deadline %s: must be longer than %s (what a run keeps to report and exit before the Job is killed), or 0", o.ActiveDeadline, JobKillMargin)
	}
	return p.err()
}

// Deadline is when a run started at start must end: --timeout after its start,
// or earlier, JobKillMargin before its Job's deadline. A CronJob names each Job
// <cronjob>-<scheduled time in minutes since the epoch>, and the Job starts at or
// after that time, so scheduled + activeDeadlineSeconds is the earliest the Job
// can be killed. A name that does not end in a plausible schedule time (a Job
// created by hand, say) leaves --timeout alone. late is how long after its
// scheduled time the run started, when known.
func (o *JobOptions) Deadline(start time.Time, timeout time.Duration) (deadline time.Time, late time.Duration, capped bool) {
	deadline = start.Add(timeout)
	scheduled, ok := o.scheduled(start)
	if !ok {
		return deadline, 0, false
	}
	late = max(start.Sub(scheduled), 0)
	if jobEnd := scheduled.Add(o.ActiveDeadline - JobKillMargin); jobEnd.Before(deadline) {
		return jobEnd, late, true
	}
	return deadline, late, false
}

// scheduled reads the schedule time from the Job's name: plausible only if it is
// no later than start (a minute of clock skew allowed) and the Job can still be
// running at start.
func (o *JobOptions) scheduled(start time.Time) (time.Time, bool) {
	i := strings.LastIndexByte(o.Name, '-')
	if o.ActiveDeadline <= 0 || i < 0 {
		return time.Time{}, false
	}
	minutes, err := strconv.ParseInt(o.Name[i+1:], 10, 64)
	if err != nil || minutes <= 0 || minutes > start.Unix()/60+1 {
		return time.Time{}, false
	}
	scheduled := time.Unix(minutes*60, 0)
	if start.Sub(scheduled) > o.ActiveDeadline {
		return time.Time{}, false
	}
	return scheduled, true
}
