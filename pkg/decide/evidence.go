package decide

import (
	"cmp"
	"fmt"
	"math"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// weigh compares the scrape with earlier readings of the process (design.md §2, "Evidence").
func weigh(p Pod, ps *state.Pod, cfg Config) (state.Evidence, string, bool) {
	// In float seconds: an age of years (a watch that never delivered) overflows a
	// time.Duration, and is exactly the case to catch.
	if age := p.Sample.WatchAge; cfg.MaxWatchAge > 0 && age != nil && *age > cfg.MaxWatchAge.Seconds() {
		saw := fmt.Sprintf("%.3gs", *age) // as a duration while one can hold it
		if *age < float64(math.MaxInt64/int64(time.Second)) {
			saw = ShortDuration(time.Duration(*age * float64(time.Second)))
		}
		return state.EvidenceStrong, fmt.Sprintf("the discovery watch saw no event for %s (> --max-watch-age %s)",
			saw, ShortDuration(cfg.MaxWatchAge)), false
	}
	cur := p.Sample.HeartbeatRejected
	if ps.Episode != nil && ps.Episode.BaselineRejected != nil && cur > *ps.Episode.BaselineRejected {
		return state.EvidenceStrong, fmt.Sprintf("%d heartbeat(s) rejected since the episode began at %s: discovery does not know nodes that are calling in",
			cur-*ps.Episode.BaselineRejected, ps.Episode.Since.UTC().Format(time.RFC3339)), false
	}
	if ps.Counters == nil {
		return state.EvidenceWeak, "no earlier counter value of this process to compare with", true
	}
	for _, c := range []*state.Counters{ps.Counters, ps.AgedCounters} {
		if c != nil && cur > c.HeartbeatRejected {
			return state.EvidenceStrong, fmt.Sprintf("%d heartbeat(s) rejected since %s: discovery does not know nodes that are calling in",
				cur-c.HeartbeatRejected, c.At.UTC().Format(time.RFC3339)), false
		}
	}
	since := cmp.Or(ps.AgedCounters, ps.Counters).At
	return state.EvidenceWeak, fmt.Sprintf("no rejected heartbeats since %s: the nodes may not reach the scheduler", since.UTC().Format(time.RFC3339)), false
}

const (
	// GaugeRefresh is how often the scheduler rewrites its gauges.
	GaugeRefresh = 15 * time.Second
	// RollWatch is how long after the first rejected heartbeats a roll is followed:
	// the gauge shows the old nodes' records dropped 40-55 s after, with margin.
	RollWatch = 75 * time.Second
	// RollRearm is how long a followed roll keeps another from being followed: a
	// node rejected for good must not make every pass sample for RollWatch.
	RollRearm = 10 * time.Minute
)

// noteRolling follows a roll into dead discovery before the gauge shows it (design.md
// §2, "Evidence"), returning how long to sample on (nil: nothing to follow).
func (p *judgedPod) noteRolling() *time.Duration {
	obs := p.obs
	if p.Sample == nil || p.ScrapeErr != nil || p.cfg.ConfirmWindow <= 0 || obs.Expected.Serving == 0 || p.Sample.Ready() < obs.Expected.Serving {
		return nil
	}
	now, cur := obs.At, p.Sample.HeartbeatRejected
	r := p.rec.Rolling
	switch {
	case r == nil:
		if p.prevCounters == nil || cur <= p.prevCounters.HeartbeatRejected {
			return nil
		}
		p.rec.Rolling = &state.Rolling{Since: now, Run: obs.RunStart, Rejected: cur}
		r = p.rec.Rolling
	case !r.Run.Equal(obs.RunStart) || now.Sub(r.Since) > RollWatch:
		return nil // followed in an earlier run, or over: not again before RollRearm
	case !r.Established && now.Sub(r.Since) >= GaugeRefresh && cur > r.Rejected:
		r.Established = true
	}
	return new(RollWatch - now.Sub(r.Since))
}

// rolledAt is where strong evidence and this run's streak count from when a wedge
// opens: where an established roll of this run began, if it opens right after; else now.
func (p *judgedPod) rolledAt(t Target) time.Time {
	r := p.rec.Rolling
	if r == nil || !r.Established || t.Verdict != state.VerdictWedged || t.Evidence != state.EvidenceStrong || p.prevVerdict != state.VerdictHealthy ||
		!r.Run.Equal(p.obs.RunStart) || p.now.Sub(r.Since) > RollWatch || p.cfg.ConfirmWindow <= 0 {
		return p.now
	}
	return r.Since
}
