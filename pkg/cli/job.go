package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// JobOptions tell a check which CronJob run it is, so that it ends before the
// Job's activeDeadlineSeconds (counted from the Job's start, not the process's)
// even when its pod started late.
type JobOptions struct {
	Name           string        // from the pod's batch.kubernetes.io/job-name label
	ActiveDeadline time.Duration // zero: unknown
}

// JobKillMargin is what a run keeps between its own deadline and the Job's, to
// report and record a failure (more than pkg/check's budgets for those) and exit.
const JobKillMargin = 30 * time.Second

func (o *JobOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Name, "job-name", "", "name of the CronJob's Job this run is (the chart sets it); with --job-active-deadline, the run ends before the Job's deadline however late its pod started")
	fs.DurationVar(&o.ActiveDeadline, "job-active-deadline", 0, "the Job's activeDeadlineSeconds, as a duration (0: unknown)")
}

func (o *JobOptions) Validate() error {
	if o.ActiveDeadline != 0 && o.ActiveDeadline <= JobKillMargin {
		return usagef("--job-active-deadline %s: must be longer than %s (what a run keeps to report and exit before the Job is killed), or 0", o.ActiveDeadline, JobKillMargin)
	}
	return nil
}

// Deadline is when a run started at start must end: --timeout after its start, or
// JobKillMargin before its Job's earliest kill, scheduled + activeDeadlineSeconds
// (a CronJob names each Job <cronjob>-<scheduled minutes since the epoch>; a name
// without a plausible one, a Job made by hand, leaves --timeout alone). late is how
// long after its scheduled time the run started, when known.
func (o *JobOptions) Deadline(start time.Time, timeout time.Duration) (deadline time.Time, late time.Duration, capped bool) {
	deadline = start.Add(timeout)
	i := strings.LastIndexByte(o.Name, '-')
	if o.ActiveDeadline <= 0 || i < 0 {
		return deadline, 0, false
	}
	minutes, err := strconv.ParseInt(o.Name[i+1:], 10, 64)
	scheduled := time.Unix(minutes*60, 0)
	// Plausible: no later than start (a minute of skew allowed), and the Job can still be running.
	if err != nil || minutes <= 0 || minutes > start.Unix()/60+1 || start.Sub(scheduled) > o.ActiveDeadline {
		return deadline, 0, false
	}
	late = max(start.Sub(scheduled), 0)
	if jobEnd := scheduled.Add(o.ActiveDeadline - JobKillMargin); jobEnd.Before(deadline) {
		return jobEnd, late, true
	}
	return deadline, late, false
}
