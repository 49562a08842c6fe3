package state

// The document's vocabulary, typed, so a misspelt outcome is a compile error. The
// words are part of the interface (docs/design.md §2-§4).

// Verdict is what a pod was judged to be.
type Verdict string

const (
	VerdictHealthy  Verdict = "healthy"
	VerdictStarting Verdict = "starting"
	VerdictNoNodes  Verdict = "no-nodes"
	VerdictUnknown  Verdict = "unknown"
	VerdictWedged   Verdict = "wedged"
	VerdictDegraded Verdict = "degraded"
)

// Bad reports a verdict that opens or extends an episode (its kind).
func (v Verdict) Bad() bool { return v == VerdictWedged || v == VerdictDegraded }

// Action is what a run did, or would do, about a pod.
type Action string

const (
	ActionNone    Action = "none"
	ActionWait    Action = "wait"
	ActionRestart Action = "restart"
	ActionBlocked Action = "blocked"
)

// Evidence says what a bad verdict rests on (docs/design.md §2, "Evidence").
type Evidence string

const (
	// EvidenceStrong: rejected heartbeats rose, or the watch is older than --max-watch-age.
	EvidenceStrong Evidence = "strong"
	// EvidenceWeak: no counter moved; the nodes may simply not reach the scheduler.
	EvidenceWeak Evidence = "weak"
)

// RestartOutcome is where a restart record stands, from claim to outcome.
type RestartOutcome string

const (
	RestartClaimed   RestartOutcome = "claimed"   // recorded before acting; the action may or may not have happened
	RestartDone      RestartOutcome = "done"      // the pod was deleted (or the rollout requested)
	RestartFailed    RestartOutcome = "failed"    // the API refused the action
	RestartAbandoned RestartOutcome = "abandoned" // claimed, never acted on, and no longer needed
)

// EpisodeOutcome is how a bad episode ended.
type EpisodeOutcome string

const (
	EpisodeRecovered        EpisodeOutcome = "recovered"         // healthy again without a restart
	EpisodeRestarted        EpisodeOutcome = "restarted"         // the pod is gone after a restart by the watchdog
	EpisodeGone             EpisodeOutcome = "gone"              // the pod disappeared, not by the watchdog's hand
	EpisodeProcessRestarted EpisodeOutcome = "process restarted" // a new container start, or counters that went down
)

// EpisodeBecame ends an episode whose kind changed: the history shows both.
func EpisodeBecame(v Verdict) EpisodeOutcome { return EpisodeOutcome("became " + string(v)) }

// RunOutcome is how the last run ended.
type RunOutcome string

const (
	RunOK          RunOutcome = "ok"
	RunError       RunOutcome = "error"
	RunInterrupted RunOutcome = "interrupted" // cut short by its own shutdown: not a failure
)

// Mode is how a run acts on its decision: live; shadow (--shadow), recording a
// would-restart instead of restarting; or dry run (--dry-run), which writes, deletes,
// records and sends nothing. Documents keep it as flags (`shadow`, `dryRun`).
type Mode uint8

const (
	ModeLive Mode = iota
	ModeShadow
	ModeDryRun
)
