// Package state is the watchdog's memory between runs: a small, versioned,
// human-readable JSON document kept in one ConfigMap (docs/design.md §3). This package holds
// the document and its codec, and talks to no API; pkg/statestore reads and writes the ConfigMap.
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"
)

// Version is the document version this build writes. Older versions are migrated on
// read (migrations, below); a newer one (written by a newer watchdog) is refused,
// never overwritten: replacing it would lose the restart budget and open claims on a
// rollback.
const Version = 2

// Bounds keep the document far below the 1 MiB object limit whatever happens.
const (
	MaxRestarts = 100
	MaxEpisodes = 50
	MaxOutbox   = 20
	// MaxDelivered bounds the memory of delivered outbox entries (Delivered).
	MaxDelivered = 100
	// MaxHistoryAge drops restart records older than this (a budget window longer
	// than a week makes no sense for a CronJob).
	MaxHistoryAge = 7 * 24 * time.Hour
	// maxEncodedBytes bounds the encoded document, whatever it holds (Encode):
	// with the unreadable copy kept beside it (maxCorruptBytes), the ConfigMap
	// stays far below the API server's 1 MiB object limit, so no write can fail
	// for size.
	maxEncodedBytes = 256 << 10
)

// State is the whole document.
type State struct {
	Version   int       `json:"version"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Pods is keyed by pod UID.
	Pods map[string]*Pod `json:"pods,omitempty"`
	// Restarts is the restart history, oldest first.
	Restarts []Restart `json:"restarts,omitempty"`
	// Episodes records bad episodes that ended, oldest first.
	Episodes []Episode `json:"episodes,omitempty"`
	// Alerts holds open problems by alert event name, for deduplication.
	Alerts map[string]*Alert `json:"alerts,omitempty"`
	// Outbox holds alerts not yet delivered to every sink.
	Outbox []Pending `json:"outbox,omitempty"`
	// Delivered remembers the outbox entries that were delivered, for as long as
	// an entry may be retried, so that a copy put back is not sent again.
	Delivered []DeliveredEntry `json:"delivered,omitempty"`
	// ConsecutiveUnknownRuns counts runs whose overall verdict was unknown since the last run
	// that saw the scheduler fine (healthy, starting, no-nodes): a bad run (wedged,
	// degraded) in between does not reset it, so a wedge seen only every other run
	// still ends up "blind" (docs/design.md, "Blind").
	ConsecutiveUnknownRuns int  `json:"consecutiveUnknownRuns"`
	LastRun                *Run `json:"lastRun,omitempty"`
	// ObservedAt is the time of the newest observation merged into this document. A
	// run whose write lost a race re-decides its own, possibly older, observation
	// against the winner's document: what is older than this never rewinds it.
	ObservedAt time.Time `json:"observedAt,omitzero"`
	// Backoff spaces restarts that do not heal (docs/design.md, "Ineffective restarts").
	Backoff *Backoff `json:"backoff,omitempty"`
	// WouldRestarts are the restarts shadow mode recorded instead of making,
	// oldest first: one per episode.
	WouldRestarts []WouldRestart `json:"wouldRestarts,omitempty"`
}

// WouldRestart is a restart that shadow mode (--shadow) did not make: every gate
// agreed, and the pod was treated as not restarted. One record per bad episode of
// a pod (EpisodeSince); Repeats counts the later runs of the episode that would
// have restarted it again.
type WouldRestart struct {
	Pod          string    `json:"pod"`
	UID          string    `json:"uid"`
	At           time.Time `json:"at"`
	EpisodeSince time.Time `json:"episodeSince"`
	Reason       string    `json:"reason"`
	Evidence     Evidence  `json:"evidence,omitempty"`
	// Gates is the gates' summary as the restart alert gives it.
	Gates string `json:"gates,omitempty"`
	// Bundle is the key of the evidence saved at that moment (pkg/evidence).
	Bundle  string    `json:"bundle,omitempty"`
	Repeats int       `json:"repeats,omitempty"`
	LastAt  time.Time `json:"lastAt,omitzero"`
}

// Backoff is the restart back-off after restarts that did not heal: the
// replacement of a restarted pod wedged again soon after it started.
type Backoff struct {
	// Ineffective counts restarts in a row that did not heal.
	Ineffective int `json:"ineffective"`
	// LastRestartAt is when the last ineffective restart was claimed; NotBefore is
	// the earliest next restart (LastRestartAt + the doubled wait).
	LastRestartAt time.Time `json:"lastRestartAt"`
	NotBefore     time.Time `json:"notBefore"`
	// Reason says why the last restart is judged ineffective, for alerts and status.
	Reason string `json:"reason"`
	// HealthySince is the start of the current run of healthy observations; an hour
	// of them ends the back-off.
	HealthySince *time.Time `json:"healthySince,omitempty"`
}

// Pod is what the watchdog remembers about one pod.
type Pod struct {
	Name string `json:"name"`
	// StartedAt is the scheduler container's current start; with the UID it names the
	// process, whose counters and wedge clock are only compared with themselves.
	StartedAt   time.Time `json:"startedAt"`
	FirstSeen   time.Time `json:"firstSeen"`
	LastSeen    time.Time `json:"lastSeen"`
	LastVerdict Verdict   `json:"lastVerdict"`
	// ConsecutiveUnknowns counts consecutive unknown observations of this pod.
	ConsecutiveUnknowns int       `json:"consecutiveUnknowns,omitempty"`
	Counters            *Counters `json:"counters,omitempty"`
	// AgedCounters is a reading of this process at least two heartbeat back-off
	// caps older than the last one was when it was kept; AgingCounters the next
	// one to become it. First sight of a wedge compares with it too: nodes back
	// off to one heartbeat a minute, so a reading one short interval old can show
	// no rejection although they are being rejected.
	AgedCounters  *Counters `json:"agedCounters,omitempty"`
	AgingCounters *Counters `json:"agingCounters,omitempty"`
	// Episode is the open bad episode of this process, nil while it is fine.
	// (Version 1 called it "bad".)
	Episode *OpenEpisode `json:"episode,omitempty"`
	// Rolling is heartbeats rejected while ready still counted every serving
	// node: nodes rolled into a discovery that may be dead, before the gauge
	// drops the old nodes' records.
	Rolling *Rolling `json:"rolling,omitempty"`
}

// Rolling is the first sample of a process, in a run, that showed heartbeats
// rejected while ready still counted every serving node, and whether a sample
// at least a gauge refresh later showed more rejected with ready unchanged
// (Established).
type Rolling struct {
	Since       time.Time `json:"since"`
	Run         time.Time `json:"run"`
	Rejected    uint64    `json:"rejected"`
	Established bool      `json:"established,omitempty"`
}

// Counters are the scheduler's counters at the last scrape of this process.
type Counters struct {
	HeartbeatOK       uint64    `json:"heartbeatOK"`
	HeartbeatRejected uint64    `json:"heartbeatRejected"`
	At                time.Time `json:"at"`
}

// OpenEpisode is the ongoing bad episode (wedged or degraded) of one process; when it
// ends it is recorded as an Episode.
type OpenEpisode struct {
	// Kind is the bad verdict the episode is of: VerdictWedged or VerdictDegraded.
	Kind Verdict `json:"kind"`
	// Since is the first bad observation; Last the latest.
	Since time.Time `json:"since"`
	Last  time.Time `json:"last"`
	// For is the wedge clock: time summed over consecutive bad observations. An
	// unknown observation pauses it (the gap around it is not counted).
	For Duration `json:"for"`
	// StrongSince is when strong evidence (rejected heartbeats rising, or a stale
	// watch) was first seen with ready never back since; nil when evidence is weak.
	StrongSince *time.Time `json:"strongSince,omitempty"`
	Evidence    Evidence   `json:"evidence"`
	// BaselineRejected is the rejected-heartbeat counter just before the episode
	// (or at its first observation when there was none): any rise over it during
	// the episode is strong evidence, even when the last interval saw none (nodes
	// back off to one heartbeat a minute).
	BaselineRejected *uint64 `json:"baselineRejected,omitempty"`
	// FirstCounters are the heartbeat counters at the episode's first bad
	// observation. While both still read the same, nothing reached the scheduler
	// since: ready cannot have risen, so a failed sample between two such
	// observations need not start the confirmation over.
	FirstCounters *Counters `json:"firstCounters,omitempty"`
	Ready         int       `json:"ready"`
	Expected      int       `json:"expected"`
	// RunSince is the first observation of the current unbroken bad streak inside
	// the run that started at Run (an unknown, or a new run, starts it over). A
	// restart must be confirmed inside the run that makes it: ready stayed bad for
	// --confirm-window of sampling in that run (docs/design.md, "Confirmation").
	RunSince *time.Time `json:"runSince,omitempty"`
	Run      time.Time  `json:"run,omitzero"`
	// ConfirmedRun is the start of the last run in which the episode was confirmed
	// in-run; PausedSinceConfirmed says the clock was paused (unknown, not judged,
	// failed run) since that confirmation.
	ConfirmedRun         *time.Time `json:"confirmedRun,omitempty"`
	PausedSinceConfirmed bool       `json:"pausedSinceConfirmed,omitempty"`
	// ConfirmedRuns counts the runs confirmed in-run in a row, each after a pause:
	// two are as good as the duration (a wedge seen only between unknown runs).
	ConfirmedRuns int `json:"confirmedRuns,omitempty"`
}

// Restart is one restart, from claim to outcome. ResumedAt is when a later run took
// over a claim its run left unfinished: from then on the claim protects that run as
// a fresh claim does.
type Restart struct {
	Pod       string         `json:"pod"`
	UID       string         `json:"uid"`
	Method    string         `json:"method"`
	ClaimedAt time.Time      `json:"claimedAt"`
	ResumedAt *time.Time     `json:"resumedAt,omitempty"`
	Outcome   RestartOutcome `json:"outcome"`
	DoneAt    *time.Time     `json:"doneAt,omitempty"`
	Reason    string         `json:"reason"`
	Evidence  Evidence       `json:"evidence,omitempty"`
	Error     string         `json:"error,omitempty"`
	// Ineffective is set when the replacement wedged again soon after it started.
	Ineffective string `json:"ineffective,omitempty"`
	// HealedAt is when the replacement was first observed healthy: the restart
	// healed, and a later wedge of the replacement is a new problem.
	HealedAt *time.Time `json:"healedAt,omitempty"`
	// Gates are the decision's gates as they passed ("✓ wedged 3m ≥ 2m30s; ...").
	Gates string `json:"gates,omitempty"`
	// Bundle is the key of the evidence saved just before the restart, in the
	// evidence ConfigMap (pkg/evidence); empty when none could be saved.
	Bundle string `json:"bundle,omitempty"`
}

// Episode is a bad episode that ended.
type Episode struct {
	Pod      string         `json:"pod"`
	UID      string         `json:"uid"`
	Kind     Verdict        `json:"kind"`
	Evidence Evidence       `json:"evidence,omitempty"`
	From     time.Time      `json:"from"`
	To       time.Time      `json:"to"`
	Outcome  EpisodeOutcome `json:"outcome"`
}

// Alert is an open problem that has been (or is being) alerted.
type Alert struct {
	Event      string     `json:"event"`
	OpenedAt   time.Time  `json:"openedAt"`
	LastSentAt *time.Time `json:"lastSentAt,omitempty"`
	Sends      int        `json:"sends"`
	Pod        string     `json:"pod,omitempty"`
	Reason     string     `json:"reason,omitempty"`
}

// Pending is an alert not yet delivered to every sink. Payload holds the facts of
// the notification (pkg/outbox rebuilds the rest on retry); Seal authenticates the
// entry with the watchdog's --outbox-key (pkg/outbox).
type Pending struct {
	ID        string          `json:"id"`
	Event     string          `json:"event"`
	CreatedAt time.Time       `json:"createdAt"`
	Attempts  int             `json:"attempts"`
	Sinks     []string        `json:"sinks"`
	LastError string          `json:"lastError,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	Seal      string          `json:"seal,omitempty"`
}

// DeliveredEntry is an outbox entry that left the outbox delivered.
type DeliveredEntry struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"createdAt"`
}

// Run is the last run's summary.
type Run struct {
	At       time.Time  `json:"at"`
	Took     Duration   `json:"took"`
	Verdict  Verdict    `json:"verdict"`
	Action   Action     `json:"action"`
	Reason   string     `json:"reason"`
	Outcome  RunOutcome `json:"outcome"`
	Error    string     `json:"error,omitempty"`
	Watchdog string     `json:"watchdog,omitempty"`
	// Shadow: the run was in shadow mode. The first run after shadow mode has every
	// open episode confirmed afresh before it may restart.
	Shadow bool `json:"shadow,omitempty"`
	// Paused is the scheduler Deployment's pause during the run, when one was
	// active ("paused until ... : reason"): restarts were held.
	Paused string `json:"paused,omitempty"`
}

// New returns an empty state.
func New() *State {
	return &State{Version: Version, Pods: map[string]*Pod{}, Alerts: map[string]*Alert{}}
}

// ErrUnreadable wraps why a stored document could not be used.
var ErrUnreadable = errors.New("state document unreadable")

// NewerVersionError is a document written by a newer watchdog. It is not
// unreadable: it is someone else's, and this build must neither use nor replace it.
type NewerVersionError struct {
	Found, Supported int
}

func (e *NewerVersionError) Error() string {
	return fmt.Sprintf("state document version %d was written by a newer watchdog (this one reads and writes version %d): refusing to use or overwrite it; run the newer watchdog, or move the document aside by hand if a rollback is intended", e.Found, e.Supported)
}

// Decode parses a stored document, migrating older versions. Empty input is a fresh
// state. An unreadable document returns an error wrapping ErrUnreadable; the caller
// recovers from it (docs/design.md §3: never fatal).
func Decode(data []byte) (*State, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return New(), nil
	}
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	if probe.Version == nil {
		return nil, fmt.Errorf("%w: no version field", ErrUnreadable)
	}
	switch v := *probe.Version; {
	case v == Version:
	case v > Version:
		return nil, &NewerVersionError{Found: v, Supported: Version}
	case v >= 1:
		for ; v < Version; v++ {
			var err error
			if data, err = migrations[v](data); err != nil {
				return nil, fmt.Errorf("%w: migrating version %d: %v", ErrUnreadable, v, err)
			}
		}
	default:
		return nil, fmt.Errorf("%w: version %d is not a known version", ErrUnreadable, v)
	}
	s := New()
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	s.sanitize()
	return s, nil
}

// sanitize repairs what a hand edit could break without making the document unreadable.
func (s *State) sanitize() {
	if s.Pods == nil {
		s.Pods = map[string]*Pod{}
	}
	if s.Alerts == nil {
		s.Alerts = map[string]*Alert{}
	}
	for uid, p := range s.Pods {
		if p == nil || uid == "" {
			delete(s.Pods, uid)
			continue
		}
		if p.ConsecutiveUnknowns < 0 {
			p.ConsecutiveUnknowns = 0
		}
		if p.Episode != nil && p.Episode.For < 0 {
			p.Episode.For = 0
		}
	}
	for k, a := range s.Alerts {
		if a == nil {
			delete(s.Alerts, k)
		}
	}
	if s.ConsecutiveUnknownRuns < 0 {
		s.ConsecutiveUnknownRuns = 0
	}
	for _, p := range s.Pods {
		if p.Episode != nil && p.Episode.ConfirmedRuns < 0 {
			p.Episode.ConfirmedRuns = 0
		}
	}
	if s.Backoff != nil && s.Backoff.Ineffective < 0 {
		s.Backoff.Ineffective = 0
	}
	s.capCounts()
}

// Encode renders the document, pruned to its bounds, indented for people.
func Encode(s *State, now time.Time) ([]byte, error) {
	s.Version = Version
	s.Prune(now)
	for {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return nil, fmt.Errorf("encode state: %w", err)
		}
		if len(b) <= maxEncodedBytes {
			return b, nil
		}
		// Something grew past reason (a giant payload or reason, thousands of pods):
		// keep the newest half, of the outbox first and of the restart history last:
		// the restart history is the budget's ledger, and dropping records inside
		// --restart-window would let the watchdog restart more often than
		// --max-restarts allows. Every other loss (a wedge clock, an alert's
		// deduplication) errs towards restarting later or alerting again. The steps
		// (bound.go) end in a document of a few hundred bytes, so this always fits.
		switch {
		case len(s.Outbox) > 1:
			s.Outbox = s.Outbox[len(s.Outbox)/2:]
		case len(s.Episodes) > 1:
			s.Episodes = s.Episodes[len(s.Episodes)/2:]
		case len(s.WouldRestarts) > 1:
			s.WouldRestarts = s.WouldRestarts[len(s.WouldRestarts)/2:]
		case s.dropStalePods():
		case s.truncateStrings(maxStringBytes):
		case s.dropAllButLedger():
		case len(s.Restarts) > 1:
			s.Restarts = s.Restarts[len(s.Restarts)/2:]
		case s.truncateStrings(maxStringBytes / 8):
		case len(s.Restarts) > 0:
			s.Restarts = nil
		default:
			return nil, fmt.Errorf("encode state: %d bytes with nothing left to drop (bound %d)", len(b), maxEncodedBytes)
		}
	}
}

// Prune applies the bounds: histories are capped by count and age.
func (s *State) Prune(now time.Time) {
	sort.SliceStable(s.Restarts, func(i, j int) bool { return s.Restarts[i].ClaimedAt.Before(s.Restarts[j].ClaimedAt) })
	cut := 0
	for cut < len(s.Restarts) && now.Sub(s.Restarts[cut].ClaimedAt) > MaxHistoryAge {
		cut++
	}
	s.Restarts = s.Restarts[cut:]
	cut = 0
	for cut < len(s.WouldRestarts) && now.Sub(s.WouldRestarts[cut].At) > MaxHistoryAge {
		cut++
	}
	s.WouldRestarts = s.WouldRestarts[cut:]
	s.capCounts()
}

// capCounts keeps the newest of each list within its bound. Decode applies it
// too: a document is read from a ConfigMap an editor may have written, and a
// thousand copies of one outbox entry must not be a thousand sends.
func (s *State) capCounts() {
	sort.SliceStable(s.Restarts, func(i, j int) bool { return s.Restarts[i].ClaimedAt.Before(s.Restarts[j].ClaimedAt) })
	s.Restarts = newest(s.Restarts, MaxRestarts)
	s.Episodes = newest(s.Episodes, MaxEpisodes)
	s.WouldRestarts = newest(s.WouldRestarts, MaxRestarts)
	s.Outbox = newest(s.Outbox, MaxOutbox)
	s.Delivered = newest(s.Delivered, MaxDelivered)
}

// newest returns the last limit elements of list.
func newest[T any](list []T, limit int) []T {
	if n := len(list); n > limit {
		return list[n-limit:]
	}
	return list
}

// RestartFor returns the latest restart record for a pod UID, or nil.
func (s *State) RestartFor(uid string) *Restart {
	for i := len(s.Restarts) - 1; i >= 0; i-- {
		if s.Restarts[i].UID == uid {
			return &s.Restarts[i]
		}
	}
	return nil
}

// WouldRestartFor returns the would-restart recorded for the episode of pod uid
// that began at since, or nil.
func (s *State) WouldRestartFor(uid string, since time.Time) *WouldRestart {
	for i := len(s.WouldRestarts) - 1; i >= 0; i-- {
		if w := &s.WouldRestarts[i]; w.UID == uid && w.EpisodeSince.Equal(since) {
			return w
		}
	}
	return nil
}

// RestartsBetween counts restarts that count against the budget: every claim
// from from to to (both included) except those abandoned before any action.
func (s *State) RestartsBetween(from, to time.Time) int {
	n := 0
	for _, r := range s.Restarts {
		if !r.ClaimedAt.Before(from) && !r.ClaimedAt.After(to) && r.Outcome != RestartAbandoned {
			n++
		}
	}
	return n
}

// Clone returns a deep copy, so a decision can be computed without touching its input.
func (s *State) Clone() *State {
	c := *s
	c.Pods = make(map[string]*Pod, len(s.Pods))
	for uid, p := range s.Pods {
		cp := *p
		if p.Counters != nil {
			counters := *p.Counters
			cp.Counters = &counters
		}
		if p.Episode != nil {
			bad := *p.Episode
			bad.StrongSince = clonePtr(p.Episode.StrongSince)
			bad.BaselineRejected = clonePtr(p.Episode.BaselineRejected)
			bad.RunSince = clonePtr(p.Episode.RunSince)
			bad.ConfirmedRun = clonePtr(p.Episode.ConfirmedRun)
			cp.Episode = &bad
		}
		c.Pods[uid] = &cp
	}
	c.Restarts = append([]Restart(nil), s.Restarts...)
	for i := range c.Restarts {
		c.Restarts[i].DoneAt = clonePtr(c.Restarts[i].DoneAt)
		c.Restarts[i].ResumedAt = clonePtr(c.Restarts[i].ResumedAt)
		c.Restarts[i].HealedAt = clonePtr(c.Restarts[i].HealedAt)
	}
	c.Episodes = append([]Episode(nil), s.Episodes...)
	c.WouldRestarts = append([]WouldRestart(nil), s.WouldRestarts...)
	c.Alerts = make(map[string]*Alert, len(s.Alerts))
	for k, a := range s.Alerts {
		ca := *a
		ca.LastSentAt = clonePtr(a.LastSentAt)
		c.Alerts[k] = &ca
	}
	c.Outbox = append([]Pending(nil), s.Outbox...)
	for i := range c.Outbox {
		// slices.Clone keeps an empty list empty (not nil): "sinks": [] must not
		// come back as null (found by FuzzDecode).
		c.Outbox[i].Sinks = slices.Clone(c.Outbox[i].Sinks)
		c.Outbox[i].Payload = slices.Clone(c.Outbox[i].Payload)
	}
	c.Delivered = append([]DeliveredEntry(nil), s.Delivered...)
	c.LastRun = clonePtr(s.LastRun)
	if s.Backoff != nil {
		b := *s.Backoff
		b.HealthySince = clonePtr(s.Backoff.HealthySince)
		c.Backoff = &b
	}
	return &c
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Duration is a time.Duration that reads and writes as "4m0s" for people.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n int64
		if err2 := json.Unmarshal(b, &n); err2 != nil {
			return fmt.Errorf("duration: %w", err)
		}
		*d = Duration(n)
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
