// Package decide is the watchdog's pure decision core: an observation, the previous
// state and the configuration go in; the next state and a verdict and action per pod
// come out. It does no I/O and reads no clock, so every edge is table-tested.
package decide

import (
	"time"

	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// severity and actionRank order verdicts and actions, the worst last: the run's is its pods' worst.
var (
	severity = []state.Verdict{state.VerdictHealthy, state.VerdictStarting, state.VerdictNoNodes, state.VerdictUnknown,
		state.VerdictDegraded, state.VerdictWedged}
	actionRank = []state.Action{state.ActionNone, state.ActionWait, state.ActionBlocked, state.ActionRestart}
)

// Restart methods.
const (
	MethodDelete  = "delete"
	MethodRollout = "rollout"
)

// Config holds the decision thresholds, named as the flags that set them; a zero
// ConfirmWindow, MaxWatchAge, MaxPods or IneffectiveWithin turns that check off.
type Config struct {
	StartupGrace      time.Duration
	WedgedFor         time.Duration
	ConfirmWindow     time.Duration
	MaxRestarts       int
	RestartWindow     time.Duration
	RestartOnDegraded bool
	MaxWatchAge       time.Duration
	Selection
	RestartMethod string
	// ClaimTimeout is how long a restart claim may stay unfinished before a later
	// run completes it: younger claims belong to a run that may still be acting.
	ClaimTimeout time.Duration
	// The back-off: docs/design.md, "Ineffective restarts".
	IneffectiveWithin time.Duration
	BackoffBase       time.Duration
	BackoffMax        time.Duration
	BackoffReset      time.Duration
	// ProbeWindow: how long the discovery probe's evidence must last to be strong (0: no probe).
	ProbeWindow time.Duration
}

// DefaultSampleInterval is the scheduler's gauge refresh: sampling faster shows nothing new.
const DefaultSampleInterval = GaugeRefresh

// Back-off defaults: like CrashLoopBackOff, on the scale of a */5 CronJob.
const (
	DefaultIneffectiveWithin = 15 * time.Minute
	DefaultBackoffBase       = 10 * time.Minute
	DefaultBackoffMax        = 2 * time.Hour
	DefaultBackoffReset      = time.Hour
)

// ClockSkewTolerance is how far another clock (a node's, a Lease holder's) may be
// off the watchdog's: a healthy Lease must not look expired through tens of seconds.
const ClockSkewTolerance = time.Minute

// JudgePods is which of the pods matching the selector a run judges.
type JudgePods string

const (
	// JudgeDeployment judges only the pods whose owner chain, by UID, leads to the
	// scheduler Deployment: a canary sharing the scheduler's labels is not judged.
	JudgeDeployment JudgePods = "deployment"
	// JudgeSelector judges every live pod matching the selector.
	JudgeSelector JudgePods = "selector"
)

// Observation is everything one run saw.
type Observation struct {
	At          time.Time
	RunStart    time.Time       // the run (pass) that took it: docs/design.md, "Confirmation"
	Expected    endpoints.Count // serving nodes, from the API server
	ExpectedErr error
	Pods        []Pod
	Leader      *Leader    // set when a leader Lease is configured
	Rollout     *Rollout   // nil until read (Result.NeedRollout)
	Ownership   *Ownership // the Deployment as this sample read it: its pods (JudgeDeployment), its pause
	// Consistent: listed with a quorum read; the watch cache lags most in API-server trouble.
	Consistent    bool
	ConsistentErr error
	Alerts        *FiringAlerts // nil until read (Result.NeedAlerts)
	HoldOnAlerts  bool          // the run reads the firing alerts: the firing-alerts gate is on
	// Probing: the discovery probe ran; a judged pod without a reading was not observed.
	Probing bool
	unseen  bool // Unseen's: the Deployment was not read again, nor its annotations
}

// Pod is one scheduler pod as observed.
type Pod struct {
	Name        string
	UID         string
	Phase       string
	Ready       bool
	Terminating bool
	// Running: the scheduler container runs; StartedAt is its current run's start.
	Running       bool
	StartedAt     time.Time
	CreatedAt     time.Time // creationTimestamp, by the API server's clock
	WaitingReason string
	// The pod's controlling owner, normally a ReplicaSet of the scheduler Deployment.
	ControllerKind string
	ControllerName string
	ControllerUID  string
	// Sample is the scrape, or ScrapeErr why there is none. Both nil: not scraped.
	Sample    *scrape.Sample
	ScrapeErr error
	IP        string
	Probe     *ProbeReading // the discovery probe's, nil when it did not run
}

// Leader is the leader Lease as read.
type Leader struct {
	Holder string
	// RenewedAt and Duration are renewTime and leaseDurationSeconds (zero: unsaid);
	// WrittenAt is when the API server last wrote renewTime, by its clock.
	RenewedAt time.Time
	Duration  time.Duration
	WrittenAt time.Time
	Err       error
}

// ExpiredAt reports when the Lease stopped naming a leader, if it has by now (past
// ClockSkewTolerance). The renewal is WrittenAt when known: renewTime is by the holder's
// clock, which may lag (never looking renewed) or run ahead (never looking stopped).
func (l *Leader) ExpiredAt(now time.Time) (time.Time, bool) {
	renewed := l.RenewedAt
	if !l.WrittenAt.IsZero() {
		renewed = l.WrittenAt
	}
	if renewed.IsZero() || l.Duration <= 0 {
		return time.Time{}, false
	}
	end := renewed.Add(l.Duration)
	return end, now.After(end.Add(ClockSkewTolerance))
}

// Rollout is the scheduler Deployment's state, for the rollout gate.
type Rollout struct {
	Name       string
	UID        string
	Found      bool
	InProgress bool
	Paused     bool
	Detail     string
	Err        error
	// Owners: by pod UID, its controller chain checked by UID (rollout method only).
	Owners      map[string]OwnerChain
	OwnersErr   error
	Annotations map[string]string // the pause is read from them
}

// Ownership is the scheduler Deployment as a sample read it: which listed pods it runs,
// by pod UID (JudgeDeployment; only pods OwnedByName are read), and its annotations (the pause).
type Ownership struct {
	Deployment  string
	Found       bool
	Err         error
	Chains      map[string]OwnerChain
	Annotations map[string]string
}

// Owns reports whether the pod's chain was verified by UID.
func (o *Ownership) Owns(p Pod) bool {
	return o.Chains[p.UID].verifies(p)
}

// OwnerChain is the verdict on one pod's controller chain. Detail names the link
// that failed, or the verified chain. It holds while the pod still names ReplicaSetUID,
// the controller it named when checked (the pods may be listed again since).
type OwnerChain struct {
	Verified      bool
	Detail        string
	ReplicaSetUID string
}

// verifies reports a chain verified for the controller reference the pod has now.
func (c OwnerChain) verifies(p Pod) bool {
	return c.Verified && c.ReplicaSetUID == p.ControllerUID
}

// Gate is one restart gate's verdict, shown in dry runs and reports.
type Gate struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// InProgress: refused as the restart is already done or under way: it pages nobody.
	InProgress bool `json:"inProgress,omitempty"`
}

// Target is the decision about one pod.
type Target struct {
	Pod      string         `json:"name"`
	UID      string         `json:"uid"`
	Judged   bool           `json:"judged"`
	Verdict  state.Verdict  `json:"verdict"`
	Action   state.Action   `json:"action"`
	Reason   string         `json:"reason"`
	Ready    *int           `json:"ready"`
	Expected *int           `json:"expected"`
	Evidence state.Evidence `json:"evidence,omitempty"`
	// BadSince and BadFor describe the ongoing wedge or degradation.
	BadSince *time.Time     `json:"since,omitempty"`
	BadFor   state.Duration `json:"badFor,omitempty"`
	Age      time.Duration  `json:"-"`
	Gates    []Gate         `json:"gates,omitempty"`
	// Confirming: strong evidence, not yet confirmed; observe again soon.
	Confirming        bool   `json:"confirming,omitempty"`
	NoEarlierCounters bool   `json:"-"`
	TakeOverClaim     bool   `json:"-"` // completing a restart an earlier run claimed
	ScrapeError       string `json:"scrapeError,omitempty"`
	ScrapeKind        string `json:"scrapeErrorKind,omitempty"` // classifies ScrapeError
	// Warnings are doubts that did not change the verdict.
	Warnings []string `json:"warnings,omitempty"`
	// SampleFor: how much longer sampling on is worth it in this run (a restart due, or an in-run confirmation).
	SampleFor *time.Duration `json:"-"`
	// Ineffective says why restarts are not healing (alerted as restart-ineffective).
	Ineffective string `json:"restartIneffective,omitempty"`
	// Probe is what the discovery probe found; NodesUnreachable: the scheduler knows
	// every serving node, none reports (nodes-unreachable, never restarted).
	Probe            string `json:"probe,omitempty"`
	NodesUnreachable bool   `json:"nodesUnreachable,omitempty"`
}

// SamplesOn is the pass's sampling rule: sample on while SampleFor, rounded up to
// whole intervals and at least one (a due restart whose reads failed has 0), fits in left.
func (t Target) SamplesOn(interval, left time.Duration) bool {
	if t.SampleFor == nil {
		return false
	}
	next := max(*t.SampleFor, 0)
	if interval > 0 {
		next = max(1, (next+interval-1)/interval) * interval
	}
	return next <= left
}

// RestartInProgress reports a blocked target refused only as a restart in progress.
func (t Target) RestartInProgress() bool {
	return t.refusedOnlyBy(func(g Gate) bool { return g.InProgress })
}

// OnlyBackoff reports a blocked target held back by the ineffective-restart
// back-off alone: restart-ineffective says so, restart-blocked would repeat it.
func (t Target) OnlyBackoff() bool {
	return t.refusedOnlyBy(func(g Gate) bool { return g.Name == GateBackoff })
}

// refusedOnlyBy reports a blocked target refused by at least one gate, all matching which.
func (t Target) refusedOnlyBy(which func(Gate) bool) bool {
	refused := false
	for _, g := range t.Gates {
		if !g.OK && !which(g) {
			return false
		}
		refused = refused || !g.OK
	}
	return t.Action == state.ActionBlocked && refused
}

// Result is a whole run's decision.
type Result struct {
	Verdict state.Verdict
	Action  state.Action
	Reason  string
	Targets []Target
	// NeedRollout, NeedConsistentRead and NeedAlerts ask for a read and another decision.
	NeedRollout        bool
	NeedConsistentRead bool
	NeedAlerts         bool
	Warnings           []string // problems of the run's configuration or surroundings
	Pause              *Pause   // the Deployment's active pause: restarts are held, and reports say so
	// PauseNotice says, once per annotation, why a pause annotation was ignored or capped.
	PauseNotice string
}
