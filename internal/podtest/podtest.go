// Package podtest builds the scheduler pods unit tests observe, one way for every
// package (descheduler's BuildTestPod style): a running, Ready pod of the scheduler
// Deployment's ReplicaSet, which options change. pkg/decide's tests use it from
// the external test package decide_test (it imports pkg/decide).
package podtest

import (
	"time"

	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/scrape"
)

// ReplicaSet and ReplicaSetUID name the pods' controller: a ReplicaSet of the
// scheduler Deployment.
const (
	ReplicaSet    = "agentenv-scheduler-7d9c4"
	ReplicaSetUID = "rs-uid"
)

// Pod is the scheduler pod name (UID "uid-"+name): running and Ready since
// started, owned by ReplicaSet, not scraped; opts change it.
func Pod(name string, started time.Time, opts ...func(*decide.Pod)) decide.Pod {
	p := decide.Pod{Name: name, UID: "uid-" + name, Phase: "Running", Ready: true, Running: true, StartedAt: started,
		ControllerKind: "ReplicaSet", ControllerName: ReplicaSet, ControllerUID: ReplicaSetUID}
	for _, o := range opts {
		o(&p)
	}
	return p
}

// UID sets the pod's UID.
func UID(uid string) func(*decide.Pod) { return func(p *decide.Pod) { p.UID = uid } }

// Scraped gives the pod a scrape: ready nodes, rejected heartbeats (Sample).
func Scraped(ready int, rejected uint64) func(*decide.Pod) {
	return func(p *decide.Pod) { p.Sample = Sample(ready, rejected) }
}

// Sample is a scrape of the scheduler's metrics: ready nodes (every other status
// zero), 1000 heartbeats accepted and rejected refused.
func Sample(ready int, rejected uint64) *scrape.Sample {
	return &scrape.Sample{
		Observed:          map[string]int{"ready": ready, "connecting": 0, "unhealthy": 0, "lingering": 0, "unspecified": 0},
		HeartbeatOK:       1000,
		HeartbeatRejected: rejected,
	}
}
