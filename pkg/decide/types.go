// Package decide is the watchdog's pure decision core: an observation, the previous
// state, the time and the configuration go in; the next state, a verdict and an
// action per pod come out. It does no I/O and reads no clock, so every edge is
// table-tested (decide_test.go).
package decide

import (
	"time"

	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/scrape"
	"github.com/agentenv/watchdog/pkg/state"
)

// The verdict, action and evidence words are the state document's (pkg/state),
// under the names the decision reads best with. They are part of the interface
// (docs/design.md §2, §4).
type (
	Verdict  = state.Verdict
	Action   = state.Action
	Evidence = state.Evidence
)

const (
	VerdictHealthy  = state.VerdictHealthy
	VerdictStarting = state.VerdictStarting
	VerdictNoNodes  = state.VerdictNoNodes
	VerdictUnknown  = state.VerdictUnknown
	VerdictWedged   = state.VerdictWedged
	VerdictDegraded = state.VerdictDegraded

	ActionNone    = state.ActionNone
	ActionWait    = state.ActionWait
	ActionRestart = state.ActionRestart
	ActionBlocked = state.ActionBlocked

	EvidenceStrong = state.EvidenceStrong
	EvidenceWeak   = state.EvidenceWeak
)

// severity orders verdicts for the run's overall verdict: the worst wins.
var severity = map[Verdict]int{VerdictHealthy: 0, VerdictStarting: 1, VerdictNoNodes: 2, VerdictUnknown: 3, VerdictDegraded: 4, VerdictWedged: 5}

var actionRank = map[Action]int{ActionNone: 0, ActionWait: 1, ActionBlocked: 2, ActionRestart: 3}

// Restart methods.
const (
	MethodDelete  = "delete"
	MethodRollout = "rollout"
)

// Config holds the decision thresholds.
type Config struct {
	StartupGrace time.Duration
	WedgedFor    time.Duration
	// ConfirmWindow is how long strong evidence must hold, ready never returning,
	// before a restart without waiting for WedgedFor. Zero disables that path.
	ConfirmWindow     time.Duration
	MaxRestarts       int
	RestartWindow     time.Duration
	RestartOnDegraded bool
	// MaxWatchAge turns a watch older than this into strong evidence; zero is off.
	MaxWatchAge time.Duration
	// JudgePods says which live pods matching the selector are judged; the zero
	// value is JudgeSelector (every one), the CLI's default JudgeDeployment.
	JudgePods JudgePods
	// LeaderLease, when set, judges only the pod holding that Lease.
	LeaderLease   string
	RestartMethod string
	// MaxPods: when more live pods match the selector (with JudgeDeployment:
	// name a ReplicaSet of the Deployment), none is judged (the verdict is
	// unknown, with a warning). Zero is no limit.
	MaxPods int
	// ClaimTimeout is how long a restart claim may stay unfinished before a later
	// run completes it: younger claims belong to a run that may still be acting.
	ClaimTimeout time.Duration
	// IneffectiveWithin: a restart did not heal when its replacement's wedge began
	// within this long of the replacement's start (docs/design.md, "Ineffective
	// restarts"). Zero turns the back-off off.
	IneffectiveWithin time.Duration
	// BackoffBase is the wait after the first ineffective restart, doubled after
	// each further one up to BackoffMax; BackoffReset of healthy observations ends it.
	BackoffBase  time.Duration
	BackoffMax   time.Duration
	BackoffReset time.Duration
	// HoldOnAlerts: restarts are held while matching alerts fire (GateAlerts).
	HoldOnAlerts bool
}

// DefaultSampleInterval is how often a pass samples while confirming: the
// scheduler's gauge refresh, since sampling faster shows nothing new.
const DefaultSampleInterval = GaugeRefresh

// Back-off defaults: like CrashLoopBackOff, on the scale of a */5 CronJob.
const (
	DefaultIneffectiveWithin = 15 * time.Minute
	DefaultBackoffBase       = 10 * time.Minute
	DefaultBackoffMax        = 2 * time.Hour
	DefaultBackoffReset      = time.Hour
)

// ClockSkewTolerance is how far in the future a container start may be before the
// watchdog stops trusting the pod's clock.
const ClockSkewTolerance = time.Minute

// JudgePods is which of the pods matching the selector a run judges.
type JudgePods string

const (
	// JudgeDeployment judges only the pods whose owner chain, by UID, leads to
	// the scheduler Deployment (pod → ReplicaSet → --deployment): a canary or a
	// debug pod sharing the scheduler's labels is listed, not judged.
	JudgeDeployment JudgePods = "deployment"
	// JudgeSelector judges every live pod matching the selector (a scheduler run
	// by something other than a Deployment).
	JudgeSelector JudgePods = "selector"
)

// Observation is everything one run saw.
type Observation struct {
	At time.Time
	// RunStart identifies the run (pass) that took this observation: a restart
	// must be confirmed by observations of one run (docs/design.md, "Confirmation").
	RunStart time.Time
	// Expected is the serving node count from the API server; ExpectedErr if unread.
	Expected    endpoints.Count
	ExpectedErr error
	Pods        []Pod
	// Leader is set when a leader Lease is configured.
	Leader *Leader
	// Rollout is the Deployment's state; nil until read (see Result.NeedRollout).
	Rollout *Rollout
	// Ownership says which pods are the Deployment's (Config.JudgePods
	// JudgeDeployment); nil when not read.
	Ownership *Ownership
	// Consistent: the pods and EndpointSlices were listed with a consistent
	// (quorum) read, not from the API server's watch cache, which can lag most
	// precisely during API-server trouble. A restart needs one (Result.NeedConsistentRead);
	// ConsistentErr is why it could not be had.
	Consistent    bool
	ConsistentErr error
	// KeepNewerRecords: this observation is merged into another run's newer state (this
	// run's write lost a race): what that run observed later stands, never rewound.
	KeepNewerRecords bool
	// Annotated is the scheduler Deployment's annotations as this observation
	// read them (the pause), nil when not read.
	Annotated *Annotated
	// Alerts are the firing alerts that hold restarts (Config.HoldOnAlerts), read
	// just before a restart; nil until read (see Result.NeedAlerts).
	Alerts *FiringAlerts
}

// Pod is one scheduler pod as observed.
type Pod struct {
	Name        string
	UID         string
	Phase       string
	Ready       bool
	Terminating bool
	// Running reports whether the scheduler container is running; StartedAt is the
	// start of its current run (state.running.startedAt, else status.startTime).
	Running       bool
	StartedAt     time.Time
	WaitingReason string
	// ControllerKind and ControllerName name the pod's controlling owner (a
	// ReplicaSet of the scheduler Deployment, normally).
	ControllerKind string
	ControllerName string
	// ControllerUID is the UID that controller reference names: the rollout method
	// restarts a pod only when the ReplicaSet of that name has this UID (see
	// Rollout.Owners).
	ControllerUID string
	// Sample is the scrape, or ScrapeErr why there is none. Both nil: not scraped.
	Sample    *scrape.Sample
	ScrapeErr error
}

// Leader is the leader Lease as read.
type Leader struct {
	Holder string
	// RenewedAt and Duration are the Lease's renewTime and leaseDurationSeconds;
	// either zero means the Lease does not say when it expires.
	RenewedAt time.Time
	Duration  time.Duration
	// WrittenAt is when the API server last wrote the holder's renewTime (the
	// Lease's managedFields), by the API server's clock; zero when unknown.
	WrittenAt time.Time
	Err       error
}

// LeaseSkew is how far past its last renewal + leaseDurationSeconds a Lease must be
// before it counts as expired: the renewal is by the API server's clock (or the
// holder's, when unknown), "now" by ours.
// Generous on purpose: a healthy Lease must not look expired on a node whose clock
// is off by tens of seconds, and a minute's delay matters little to a */5 check.
const LeaseSkew = time.Minute

// ExpiredAt reports when the Lease stopped naming a leader, if it has by now. The
// last renewal is when the API server wrote it (WrittenAt), when known: renewTime
// comes from the holder's clock, and a holder whose clock lags would otherwise
// never look renewed, one whose clock runs ahead never look stopped.
func (l *Leader) ExpiredAt(now time.Time) (time.Time, bool) {
	renewed := l.RenewedAt
	if !l.WrittenAt.IsZero() {
		renewed = l.WrittenAt
	}
	if renewed.IsZero() || l.Duration <= 0 {
		return time.Time{}, false
	}
	end := renewed.Add(l.Duration)
	return end, now.After(end.Add(LeaseSkew))
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
	// Owners is, by pod UID, whether the pod's controller chain was read and
	// checked by UID (pod → ReplicaSet → this Deployment). The observer fills it
	// for the rollout method only; a pod missing from it is unverified.
	Owners map[string]OwnerChain
	// OwnersErr is the first API error met reading that chain (RBAC, say).
	OwnersErr error
	// Annotations are the Deployment's own (the pause is read from them).
	Annotations map[string]string
}

// Ownership is which listed pods the scheduler Deployment runs, read by UID for
// every observation (JudgeDeployment). Only pods whose controller reference names
// a ReplicaSet of the Deployment (OwnedByName) are read and counted; Chains holds
// their verdicts by pod UID.
type Ownership struct {
	Deployment string
	Found      bool
	Err        error
	Chains     map[string]OwnerChain
}

// Owns reports whether the pod's chain was verified by UID (OwnerChain.verifies).
func (o *Ownership) Owns(p Pod) bool {
	return o.Chains[p.UID].verifies(p)
}

// OwnerChain is the verdict on one pod's controller chain. Detail names the link
// that failed, or the verified chain.
type OwnerChain struct {
	Verified bool
	Detail   string
	// ReplicaSetUID is the controller UID the pod named when the chain was
	// checked: the verdict holds only for a pod that still names it (the pods may
	// be listed again, consistently, after the Deployment was read).
	ReplicaSetUID string
}

// verifies reports a chain verified by UID for the controller reference the pod
// has now.
func (c OwnerChain) verifies(p Pod) bool {
	return c.Verified && c.ReplicaSetUID == p.ControllerUID
}

// Gate is one restart gate's verdict, shown in dry runs and reports.
type Gate struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// InProgress marks a refusal because the restart is already done or under way
	// (another run's claim, a replacement still starting): not a blocked restart,
	// so it pages nobody.
	InProgress bool `json:"inProgress,omitempty"`
}

// Target is the decision about one pod.
type Target struct {
	Pod      string   `json:"name"`
	UID      string   `json:"uid"`
	Judged   bool     `json:"judged"`
	Verdict  Verdict  `json:"verdict"`
	Action   Action   `json:"action"`
	Reason   string   `json:"reason"`
	Ready    *int     `json:"ready"`
	Expected *int     `json:"expected"`
	Evidence Evidence `json:"evidence,omitempty"`
	// BadSince and BadFor describe the ongoing wedge or degradation.
	BadSince *time.Time     `json:"since,omitempty"`
	BadFor   state.Duration `json:"badFor,omitempty"`
	Age      time.Duration  `json:"-"`
	Gates    []Gate         `json:"gates,omitempty"`
	// Confirming: strong evidence, not yet confirmed; observe again soon.
	Confirming bool `json:"confirming,omitempty"`
	// NoEarlierCounters: no earlier counter value of this process to weigh the evidence by.
	NoEarlierCounters bool `json:"-"`
	// TakeOverClaim: the restart is one an earlier run claimed and did not finish.
	TakeOverClaim bool `json:"-"`
	// ScrapeError is why the pod's metrics could not be read, if they could not.
	ScrapeError string `json:"scrapeError,omitempty"`
	// ScrapeKind classifies ScrapeError (timeout, http-status, ...).
	ScrapeKind string `json:"scrapeErrorKind,omitempty"`
	// Warnings are doubts that did not change the verdict (an optional gauge
	// dropped, ready above the serving nodes listed).
	Warnings []string `json:"warnings,omitempty"`
	// SampleFor is how much longer sampling on is worth it in this run: until a
	// restart can be due (the confirm window, the rest of --wedged-for), or until
	// the wedge is confirmed in-run, which a later run can build on; after a failed
	// sample, while what the next one shows could still be confirmed. The pass
	// keeps sampling while it fits before its deadline.
	SampleFor *time.Duration `json:"-"`
	// Ineffective says why restarts are not healing this scheduler, while the
	// back-off holds a restart back (or when it was first found): it is alerted as
	// restart-ineffective.
	Ineffective string `json:"restartIneffective,omitempty"`
}

// SamplesOn is the pass's sampling rule: sample on, every interval, while the
// sample that SampleFor asks for fits in left. That sample is SampleFor rounded up
// to a whole number of intervals, at least one: sampling on is always for another
// sample, an interval away, even when SampleFor is 0 (a restart already due whose
// last sample failed, or whose reads failed).
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

// RestartInProgress reports a blocked target whose every refusing gate is a restart
// already done or under way.
func (t Target) RestartInProgress() bool {
	return t.refusedOnlyBy(func(g Gate) bool { return g.InProgress })
}

// OnlyBackoff reports a blocked target held back by the ineffective-restart
// back-off alone: restart-ineffective says so, restart-blocked would repeat it.
func (t Target) OnlyBackoff() bool {
	return t.refusedOnlyBy(func(g Gate) bool { return g.Name == GateBackoff })
}

// refusedOnlyBy reports a blocked target refused by at least one gate, all of them
// matching which.
func (t Target) refusedOnlyBy(which func(Gate) bool) bool {
	if t.Action != ActionBlocked {
		return false
	}
	refused := 0
	for _, g := range t.Gates {
		if !g.OK {
			if !which(g) {
				return false
			}
			refused++
		}
	}
	return refused > 0
}

// Result is a whole run's decision.
type Result struct {
	Verdict Verdict
	Action  Action
	Reason  string
	Targets []Target
	// NeedRollout asks the caller to read the Deployment and decide again: a
	// restart is due and the rollout gate cannot be judged without it.
	NeedRollout bool
	// NeedConsistentRead asks the caller to observe again with consistent reads
	// and decide again: a restart is due on lists served from the watch cache.
	NeedConsistentRead bool
	// Warnings are problems of the run's configuration or surroundings that the
	// caller should report as warnings (too many pods matching the selector).
	Warnings []string
	// Pause is the scheduler Deployment's pause, while one is active: restarts
	// are held (GatePaused), and every report and alert says so.
	Pause *Pause
	// NeedAlerts asks the caller to read the firing alerts and decide again.
	NeedAlerts bool
}
