// Package schedsim simulates the AgentENV scheduler's metrics: the signatures of
// docs/design.md §1 as measured, on a clock that can be compressed (integration
// tests replay a */5 CronJob in seconds) or injected (the pass's sequence tests
// replay hours of runs on a fake clock). It needs no API server; internal/testenv
// serves it to the real one.
package schedsim

import (
	"math"
	"net/http"
	"sync"
	"time"
)

// Phase is what the simulated scheduler's discovery is doing (docs/design.md §1, the signatures table).
type Phase int

const (
	// Healthy: ready N, heartbeats accepted every 5 s per node.
	Healthy Phase = iota
	// DeadRolled: discovery stale, then the nodes rolled: ready N until ~40 s after
	// the roll, then 0; unhealthy the old count; every new node's heartbeat rejected
	// with back-off 5 s doubling to 60 s.
	DeadRolled
	// Unreachable: nodes cannot reach the scheduler: ready N until ~40 s after the
	// last heartbeat, then 0; unhealthy the old count; no counter moves.
	Unreachable
	// Flap: an API-server flap that heals itself: ready 0 and heartbeats rejected
	// (with back-off) until the heal, then healthy again. Set HealAfter.
	Flap
	// StaleCache: some nodes rolled while discovery was stale: ready drops to the
	// nodes discovery still knows (Stale of them), the rest are rejected.
	StaleCache
)

// Sim is a scheduler stand-in whose metrics follow docs/design.md §1's measured
// signatures, on a compressed clock: Speed scheduler-seconds pass per real second,
// so a */5 CronJob and its timings can be replayed in seconds.
type Sim struct {
	mu    sync.Mutex
	Nodes int
	Speed float64
	// HealAfter is how long a Flap lasts (scheduler time).
	HealAfter time.Duration
	// Stale is how many nodes a StaleCache phase still counts as ready.
	Stale int

	start  time.Time // process start, real time
	phases []simPhase
	now    func() time.Time
}

type simPhase struct {
	kind Phase
	at   time.Duration // scheduler time since process start
}

// NewSim simulates a healthy scheduler process with n nodes that has been up
// for an hour (scheduler time).
func NewSim(nodes int, speed float64) *Sim {
	return NewSimOn(nodes, speed, time.Now)
}

// NewSimOn is NewSim on the clock now.
func NewSimOn(nodes int, speed float64, now func() time.Time) *Sim {
	s := &Sim{Nodes: nodes, Speed: speed, now: now}
	s.start = s.now().Add(-s.Real(time.Hour))
	s.phases = []simPhase{{Healthy, 0}}
	return s
}

// elapsed is scheduler time since the process started.
func (s *Sim) elapsed() time.Duration {
	return time.Duration(float64(s.now().Sub(s.start)) * s.Speed)
}

// Set enters a phase now and returns the real time it began.
func (s *Sim) Set(p Phase) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.phases = append(s.phases, simPhase{p, s.elapsed()})
	return s.now()
}

// RestartProcess simulates a new scheduler process: counters reset, the first
// gauge refresh writes zeros, discovery healthy.
func (s *Sim) RestartProcess() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.start = s.now()
	s.phases = []simPhase{{Healthy, 0}}
}

// Real converts a scheduler-time duration to real time.
func (s *Sim) Real(d time.Duration) time.Duration { return time.Duration(float64(d) / s.Speed) }

// Scaled converts a real duration to scheduler time.
func (s *Sim) Scaled(d time.Duration) time.Duration { return time.Duration(float64(d) * s.Speed) }

const (
	refresh   = 15 * time.Second // gauges refresh
	heartbeat = 5 * time.Second
	forget    = 40 * time.Second // a node's record turns ready→gone after the roll
)

// rejections is how many heartbeats one node has had rejected d after it started
// being rejected: at 0, 5, 15, 35, 75 s (back-off 5 s doubling), then every 60 s.
func rejections(d time.Duration) uint64 {
	if d < 0 {
		return 0
	}
	offsets := []time.Duration{0, 5 * time.Second, 15 * time.Second, 35 * time.Second, 75 * time.Second}
	n := uint64(0)
	for _, o := range offsets {
		if d >= o {
			n++
		}
	}
	if d > 75*time.Second {
		n += uint64((d - 75*time.Second) / time.Minute)
	}
	return n
}

// Values is the page at the current time.
func (s *Sim) Values() Values {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.elapsed()
	// Gauges show the last refresh; the first refresh after start writes zeros.
	tick := time.Duration(math.Floor(float64(t)/float64(refresh))) * refresh
	v := Values{}
	if tick > 0 {
		v.Ready, v.Unhealthy = s.gaugesAt(tick)
	}
	v.HeartbeatOK, v.HeartbeatRejected = s.countersAt(t)
	return v
}

func (s *Sim) phaseAt(t time.Duration) (simPhase, time.Duration) {
	cur := s.phases[0]
	end := time.Duration(math.MaxInt64)
	for i, p := range s.phases {
		if p.at <= t {
			cur = p
			if i+1 < len(s.phases) {
				end = s.phases[i+1].at
			} else {
				end = time.Duration(math.MaxInt64)
			}
		}
	}
	return cur, end
}

func (s *Sim) gaugesAt(t time.Duration) (ready, unhealthy int) {
	p, _ := s.phaseAt(t)
	in := t - p.at
	switch p.kind {
	case DeadRolled, Unreachable:
		if in < forget {
			return s.Nodes, 0
		}
		return 0, s.Nodes
	case Flap:
		if in < s.HealAfter {
			return 0, s.Nodes
		}
		return s.Nodes, 0
	case StaleCache:
		return s.Stale, 0
	}
	return s.Nodes, 0
}

// countersAt sums heartbeats over the phases up to t.
func (s *Sim) countersAt(t time.Duration) (ok, rejected uint64) {
	for i, p := range s.phases {
		if p.at > t {
			break
		}
		end := t
		if i+1 < len(s.phases) && s.phases[i+1].at < t {
			end = s.phases[i+1].at
		}
		span := end - p.at
		nodes := uint64(s.Nodes)
		switch p.kind {
		case Healthy:
			ok += nodes * uint64(span/heartbeat)
		case DeadRolled:
			rejected += nodes * rejections(span)
		case Flap:
			bad := min(span, s.HealAfter)
			rejected += nodes * rejections(bad)
			if span > s.HealAfter {
				ok += nodes * uint64((span-s.HealAfter)/heartbeat)
			}
		case StaleCache:
			ok += uint64(s.Stale) * uint64(span/heartbeat)
			rejected += uint64(s.Nodes-s.Stale) * rejections(span)
		}
	}
	return ok, rejected
}

// ServeHTTP serves the current page.
func (s *Sim) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(Page(s.Values())))
}
