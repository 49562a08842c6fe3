package decide

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// ProbeReading is what the discovery probe read of one judged pod in a sample.
type ProbeReading struct {
	At     time.Time // when ListNodes answered
	Nodes  []string  // the node ids ListNodes named
	Err    error     // ListNodes failed: unknown for this evidence, never bad
	Canary *CanaryReading
}

// CanaryReading is the pass's canary as this pod's ListNodes showed it.
type CanaryReading struct {
	Name      string    // its node id, new for each canary
	WrittenAt time.Time // when the API server accepted it
	Seen      bool
	Err       error // not written, or no longer the object written: it proves nothing
}

// probeFinding is what the probe says about a judged pod in this sample.
type probeFinding struct {
	dead     string // strong evidence that discovery is dead, naming it
	knowsAll bool   // ListNodes named every serving node
	unknown  bool   // ListNodes or the canary failed in this sample
	pending  bool   // a canary unseen, not yet for the window: sample on
	note     string
}

// noteProbe brings the process's probe record up to this sample's reading
// (docs/design.md, "The discovery probe").
func (p *judgedPod) noteProbe() {
	win := p.cfg.ProbeWindow
	if win <= 0 || !p.obs.Probing {
		return
	}
	r, pr := p.Probe, p.rec.Probe
	if r == nil || p.obs.ExpectedErr != nil {
		// The API server did not answer: the informer may relist, up to 85 s.
		if pr != nil {
			p.rec.Probe = &state.Probe{SeenAt: pr.SeenAt}
		}
		p.probe.note = "not probed in this sample (the API server was not read): the probe's count starts over"
		return
	}
	pr = cmp.Or(pr, &state.Probe{})
	p.rec.Probe = pr
	if r.Err != nil {
		p.probe.unknown, p.probe.note = true, fmt.Sprintf("%v: unknown for the probe's evidence", r.Err)
		return
	}
	known := map[string]bool{}
	for _, n := range r.Nodes {
		known[n] = true
	}
	missing := slices.DeleteFunc(slices.Clone(p.obs.Expected.Nodes), func(n string) bool { return known[n] })
	p.probe.knowsAll = len(missing) == 0
	notes := []string{fmt.Sprintf("ListNodes names %d node(s), %d of the %d serving unknown", len(r.Nodes), len(missing), len(p.obs.Expected.Nodes))}
	old := p.noteMissing(missing)
	if len(old) > 0 {
		listed := p.now.Sub(pr.Missing[old[0]])
		p.probe.dead = fmt.Sprintf("%d node(s) listed for %s are unknown to the scheduler: %s", len(old), ShortDuration(listed), strings.Join(old[:min(len(old), 5)], ", "))
	}
	if c := r.Canary; c != nil {
		notes = append(notes, p.noteCanary(c, r.At, win))
	}
	p.probe.note = strings.Join(notes, "; ")
}

// noteMissing keeps since when each serving node has been unknown (at most
// state.MaxMissing, the oldest), and returns those unknown for the window, oldest first.
func (p *judgedPod) noteMissing(missing []string) []string {
	pr := p.rec.Probe
	was := pr.Missing
	pr.Missing = map[string]time.Time{}
	for _, n := range missing {
		pr.Missing[n] = p.now
		if at, ok := was[n]; ok && at.Before(p.now) {
			pr.Missing[n] = at
		}
	}
	ids := slices.SortedFunc(maps.Keys(pr.Missing), func(a, b string) int {
		return cmp.Or(pr.Missing[a].Compare(pr.Missing[b]), strings.Compare(a, b))
	})
	for _, n := range ids[min(len(ids), state.MaxMissing):] {
		delete(pr.Missing, n)
	}
	if len(pr.Missing) == 0 {
		pr.Missing = nil
	}
	return slices.DeleteFunc(ids[:min(len(ids), state.MaxMissing)], func(n string) bool {
		return p.now.Sub(pr.Missing[n]) < p.cfg.ProbeWindow
	})
}

// noteCanary counts the time the canary existed unseen (verified as written) and
// says what it showed. A canary seen resets the count; one written before the
// process started proves its first list, not its watch.
func (p *judgedPod) noteCanary(c *CanaryReading, at time.Time, win time.Duration) string {
	pr := p.rec.Probe
	switch {
	case c.Err != nil:
		p.probe.unknown = true
		pr.Unseen, pr.Canary, pr.CreditedTo = 0, "", nil
		return fmt.Sprintf("canary: %v: it proves nothing, the count starts over", c.Err)
	case c.Seen && c.WrittenAt.Before(p.StartedAt):
		return fmt.Sprintf("canary %s seen, but written before this process started: proof of its first list, not of its watch", c.Name)
	case c.Seen:
		pr.Unseen, pr.Canary, pr.CreditedTo, pr.SeenAt = 0, "", nil, new(at)
		return fmt.Sprintf("canary %s seen %s after it was written", c.Name, at.Sub(c.WrittenAt).Round(time.Millisecond))
	}
	from := slices.MaxFunc([]time.Time{c.WrittenAt, p.StartedAt}, time.Time.Compare)
	if pr.Canary == c.Name && pr.CreditedTo != nil && pr.CreditedTo.After(from) {
		from = *pr.CreditedTo
	}
	if at.After(from) {
		pr.Unseen += state.Duration(at.Sub(from))
	}
	pr.Canary, pr.CreditedTo = c.Name, new(at)
	if pr.Unseen.D() < win {
		p.probe.pending = true
		return fmt.Sprintf("canary %s not seen yet: canaries unseen for %s in all, of the %s window", c.Name, ShortDuration(pr.Unseen.D()), ShortDuration(win))
	}
	dead := fmt.Sprintf("canaries were missing from the scheduler's node list for %s in all (the latest written %s ago): its discovery sees no change", ShortDuration(pr.Unseen.D()), ShortDuration(at.Sub(c.WrittenAt)))
	p.probe.dead = strings.TrimPrefix(p.probe.dead+"; "+dead, "; ")
	return "canary " + c.Name + " not seen"
}
