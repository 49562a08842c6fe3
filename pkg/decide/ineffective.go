package decide

import (
	"cmp"
	"fmt"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// noteIneffective records a restart this pod's wedge shows did not heal, and the
// back-off it starts, and returns why (docs/design.md, "Ineffective restarts").
func (p *judgedPod) noteIneffective(e *state.OpenEpisode) string {
	s, cfg := p.state, p.cfg
	if cfg.IneffectiveWithin <= 0 {
		return ""
	}
	r := replacedBy(s, p.Pod, cfg.IneffectiveWithin, p.now)
	if r == nil || e.Since.Sub(p.StartedAt) > cfg.IneffectiveWithin {
		return ""
	}
	b := cmp.Or(s.Backoff, &state.Backoff{})
	s.Backoff = b
	b.Ineffective++
	wait := cfg.BackoffBase << min(max(b.Ineffective-1, 0), 16)
	if wait <= 0 || wait > cfg.BackoffMax {
		wait = cfg.BackoffMax
	}
	b.LastRestartAt, b.NotBefore, b.HealthySince = r.ClaimedAt, r.ClaimedAt.Add(wait), nil
	gap := p.StartedAt.Sub(r.ClaimedAt) // by one clock where the API server's are known
	if r.ServerAt != nil && !p.CreatedAt.IsZero() {
		gap = p.CreatedAt.Sub(*r.ServerAt)
	}
	r.Ineffective = fmt.Sprintf("the %s of pod %s at %s did not heal the scheduler: its replacement %s started %s later and was %s again %s after it started; the cause is likely outside the scheduler (its RBAC for EndpointSlices, the network to the nodes)",
		r.Method, r.Pod, r.ClaimedAt.UTC().Format(time.RFC3339), p.Name, ShortDuration(gap), e.Kind, ShortDuration(e.Since.Sub(p.StartedAt)))
	return r.Ineffective
}

// noteHealed records that the restart this healthy pod replaces healed: a later
// wedge of it is a new problem. With the back-off off, the default window applies.
func (p *judgedPod) noteHealed() {
	within := cmp.Or(max(p.cfg.IneffectiveWithin, 0), DefaultIneffectiveWithin)
	if r := replacedBy(p.state, p.Pod, within, p.now); r != nil {
		r.HealedAt = new(p.now)
	}
}

// replacedBy returns the latest restart, done and not yet judged, of another pod at
// most within before this process started. Records dated ahead are passed over.
func replacedBy(s *state.State, p Pod, within time.Duration, now time.Time) *state.Restart {
	for i := len(s.Restarts) - 1; i >= 0; i-- {
		r := &s.Restarts[i]
		if r.Outcome != state.RestartDone || r.UID == p.UID || datedAhead(*r, now) {
			continue
		}
		// Pod timestamps have whole seconds: a replacement started in the second
		// of the claim counts as started after it. Both by the API server's clock
		// when known: a watchdog or kubelet clock off by seconds hides nothing.
		claimed, started := r.ClaimedAt.Truncate(time.Second), p.StartedAt
		if r.ServerAt != nil && !p.CreatedAt.IsZero() {
			claimed, started = r.ServerAt.Truncate(time.Second), p.CreatedAt
		}
		if r.Ineffective != "" || r.HealedAt != nil || started.Before(claimed) || started.Sub(claimed) > within {
			return nil
		}
		return r
	}
	return nil
}

// endBackoffOnceHealthy ends the back-off once the scheduler stayed healthy for BackoffReset.
func endBackoffOnceHealthy(s *state.State, now time.Time, cfg Config) {
	switch b := s.Backoff; {
	case b == nil:
	case b.HealthySince == nil:
		b.HealthySince = new(now)
	case now.Sub(*b.HealthySince) >= cfg.BackoffReset:
		s.Backoff = nil
	}
}
