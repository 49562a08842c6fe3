// Package state is the watchdog's memory between runs: a versioned JSON document and
// its codec (docs/design.md §3). It talks to no API; pkg/statestore keeps the ConfigMap.
package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"
)

// Version is the document version this build writes. Older versions are migrated on
// read; a newer one is refused, never overwritten: a rollback would lose the budget.
const Version = 2

// Bounds keep the document far below the 1 MiB object limit whatever happens.
const (
	MaxRestarts   = 100
	MaxEpisodes   = 50
	MaxOutbox     = 20
	MaxHistoryAge = 7 * 24 * time.Hour // a restart budget window of over a week makes no sense
	// maxEncodedBytes: with the unreadable copy beside it (maxCorruptBytes), no write fails for size.
	maxEncodedBytes = 256 << 10
)

// State is the whole document (docs/design.md §3, "Fields").
type State struct {
	Version                int               `json:"version"`
	UpdatedAt              time.Time         `json:"updatedAt,omitzero"`
	Pods                   map[string]*Pod   `json:"pods,omitempty"`     // by pod UID
	Restarts               []Restart         `json:"restarts,omitempty"` // oldest first: the budget's ledger
	Episodes               []Episode         `json:"episodes,omitempty"` // ended, oldest first
	Alerts                 map[string]*Alert `json:"alerts,omitempty"`   // open problems by event, for deduplication
	Outbox                 []Pending         `json:"outbox,omitempty"`
	ConsecutiveUnknownRuns int               `json:"consecutiveUnknownRuns"` // docs/design.md, "Blind"
	LastRun                *Run              `json:"lastRun,omitempty"`
	Backoff                *Backoff          `json:"backoff,omitempty"`
	WouldRestarts          []WouldRestart    `json:"wouldRestarts,omitempty"` // shadow mode's, oldest first
	// PauseNotice is the pause annotation last told as ignored or capped (decide).
	PauseNotice *PauseNotice `json:"pauseNotice,omitempty"`
}

// PauseNotice is a pause annotation told once: a hash of its values, and when first seen.
type PauseNotice struct {
	Key   string    `json:"key"`
	Since time.Time `json:"since"`
}

// WouldRestart is a restart shadow mode did not make: one per bad episode
// (EpisodeSince); Repeats counts the episode's later runs that would have made it.
type WouldRestart struct {
	Pod          string    `json:"pod"`
	UID          string    `json:"uid"`
	At           time.Time `json:"at"`
	EpisodeSince time.Time `json:"episodeSince"`
	Reason       string    `json:"reason"`
	Evidence     Evidence  `json:"evidence,omitempty"`
	Gates        string    `json:"gates,omitempty"`
	Bundle       string    `json:"bundle,omitempty"` // the evidence saved then (pkg/evidence)
	Repeats      int       `json:"repeats,omitempty"`
	LastAt       time.Time `json:"lastAt,omitzero"`
}

// Backoff is the restart back-off after restarts that did not heal (design.md, "Ineffective restarts").
type Backoff struct {
	Ineffective   int        `json:"ineffective"`            // restarts in a row that did not heal
	LastRestartAt time.Time  `json:"lastRestartAt"`          // the last such restart's claim
	NotBefore     time.Time  `json:"notBefore"`              // the earliest next restart
	HealthySince  *time.Time `json:"healthySince,omitempty"` // the healthy streak that ends it
}

// Pod is what the watchdog remembers about one pod.
type Pod struct {
	Name string `json:"name"`
	// StartedAt is the container's current start: with the UID it names the process,
	// whose counters and wedge clock are only compared with themselves.
	StartedAt           time.Time `json:"startedAt"`
	FirstSeen           time.Time `json:"firstSeen"`
	LastSeen            time.Time `json:"lastSeen"`
	LastVerdict         Verdict   `json:"lastVerdict"`
	ConsecutiveUnknowns int       `json:"consecutiveUnknowns,omitempty"`
	Counters            *Counters `json:"counters,omitempty"`
	// AgedCounters is a reading two heartbeat back-off caps older than the last,
	// AgingCounters the next to become it: one short interval can show no rejection.
	AgedCounters  *Counters    `json:"agedCounters,omitempty"`
	AgingCounters *Counters    `json:"agingCounters,omitempty"`
	Episode       *OpenEpisode `json:"episode,omitempty"` // "bad" in version 1
	Rolling       *Rolling     `json:"rolling,omitempty"`
	Probe         *Probe       `json:"probe,omitempty"`
}

// Rolling is a roll followed in a run: heartbeats rejected while ready still counted
// every serving node (docs/design.md §2, "Evidence").
type Rolling struct {
	Since       time.Time `json:"since"`
	Run         time.Time `json:"run"`
	Rejected    uint64    `json:"rejected"`
	Established bool      `json:"established,omitempty"`
}

// Counters are the scheduler's heartbeat counters at a scrape.
type Counters struct {
	HeartbeatOK       uint64    `json:"heartbeatOK"`
	HeartbeatRejected uint64    `json:"heartbeatRejected"`
	At                time.Time `json:"at"`
}

// OpenEpisode is the ongoing bad episode (wedged or degraded) of one process; it ends
// as an Episode. docs/design.md §2 ("The wedge clock", "Confirmation") explains its fields.
type OpenEpisode struct {
	Kind        Verdict    `json:"kind"`
	Since       time.Time  `json:"since"`
	Last        time.Time  `json:"last"`
	For         Duration   `json:"for"` // the wedge clock
	StrongSince *time.Time `json:"strongSince,omitempty"`
	Evidence    Evidence   `json:"evidence"`
	// BaselineRejected is the rejected counter just before the episode: any rise over
	// it is strong evidence, even when the last interval saw none.
	BaselineRejected *uint64 `json:"baselineRejected,omitempty"`
	// FirstCounters are the counters at the first bad observation: while both read
	// the same, ready cannot have risen, and a failed sample can be bridged.
	FirstCounters *Counters  `json:"firstCounters,omitempty"`
	Ready         int        `json:"ready"`
	Expected      int        `json:"expected"`
	RunSince      *time.Time `json:"runSince,omitempty"` // the bad streak inside the run that started at Run
	Run           time.Time  `json:"run,omitzero"`
	// ConfirmedRun is the last run that confirmed the episode in-run; ConfirmedRuns
	// counts such runs in a row, each after a pause (PausedSinceConfirmed).
	ConfirmedRun         *time.Time `json:"confirmedRun,omitempty"`
	PausedSinceConfirmed bool       `json:"pausedSinceConfirmed,omitempty"`
	ConfirmedRuns        int        `json:"confirmedRuns,omitempty"`
}

// Restart is one restart, from claim to outcome. ResumedAt: a later run took over the unfinished claim.
type Restart struct {
	Pod       string    `json:"pod"`
	UID       string    `json:"uid"`
	Method    string    `json:"method"`
	ClaimedAt time.Time `json:"claimedAt"`
	// ServerAt is the restart's time by the API server's clock (the old pod's
	// deletionTimestamp less its grace; the rollout patch's managedFields time).
	ServerAt    *time.Time     `json:"serverAt,omitempty"`
	ResumedAt   *time.Time     `json:"resumedAt,omitempty"`
	Outcome     RestartOutcome `json:"outcome"`
	DoneAt      *time.Time     `json:"doneAt,omitempty"`
	Reason      string         `json:"reason"`
	Evidence    Evidence       `json:"evidence,omitempty"`
	Error       string         `json:"error,omitempty"`
	Ineffective string         `json:"ineffective,omitempty"` // why the restart did not heal
	// HealedAt: the replacement was seen healthy, so its later wedge is a new problem.
	HealedAt *time.Time `json:"healedAt,omitempty"`
	Gates    string     `json:"gates,omitempty"`
	Bundle   string     `json:"bundle,omitempty"` // the evidence saved before it (pkg/evidence)
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
}

// Why is the back-off's reason, in the watchdog's words from its fields: no text
// read back from the state goes out in an alert.
func (b *Backoff) Why() string {
	return fmt.Sprintf("%d restart(s) in a row did not heal the scheduler, the last claimed at %s; restarts wait until %s; "+
		"the cause is likely outside the scheduler (its RBAC for EndpointSlices, the network to the nodes)",
		b.Ineffective, b.LastRestartAt.UTC().Format(time.RFC3339), b.NotBefore.UTC().Format(time.RFC3339))
}

// Pending is an alert not yet delivered to every sink: Payload holds its notification.
type Pending struct {
	ID        string          `json:"id"`
	Event     string          `json:"event"`
	CreatedAt time.Time       `json:"createdAt"`
	Attempts  int             `json:"attempts"`
	Sinks     []string        `json:"sinks"`
	LastError string          `json:"lastError,omitempty"`
	Payload   json.RawMessage `json:"payload"`
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
	Shadow   bool       `json:"shadow,omitempty"` // the next live run confirms every episode afresh
	Paused   string     `json:"paused,omitempty"` // the Deployment's pause: restarts were held
}

// New returns an empty state.
func New() *State {
	return &State{Version: Version, Pods: map[string]*Pod{}, Alerts: map[string]*Alert{}}
}

// ErrUnreadable wraps why a stored document could not be used.
var ErrUnreadable = errors.New("state document unreadable")

// NewerVersionError is a document written by a newer watchdog: neither used nor replaced.
type NewerVersionError struct {
	Found, Supported int
}

func (e *NewerVersionError) Error() string {
	return fmt.Sprintf("state document version %d was written by a newer watchdog (this one reads and writes version %d): refusing to use or overwrite it; run the newer watchdog, or move the document aside by hand if a rollback is intended", e.Found, e.Supported)
}

// Decode parses a stored document, migrating older versions. Empty input is a fresh
// state; an unreadable document is an error wrapping ErrUnreadable.
func Decode(data []byte) (*State, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return New(), nil
	}
	var probe struct {
		Version int `json:"version"` // 0 when missing: not a known version
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	switch v := probe.Version; {
	case v == Version:
	case v > Version:
		return nil, &NewerVersionError{Found: v, Supported: Version}
	case v == 1: // a migration per version, each knowing the two layouts it joins
		var err error
		if data, err = migrate1to2(data); err != nil {
			return nil, fmt.Errorf("%w: migrating version %d: %v", ErrUnreadable, v, err)
		}
	default:
		return nil, fmt.Errorf("%w: version %d is not a known version", ErrUnreadable, v)
	}
	s := New()
	if err := json.Unmarshal(data, s); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnreadable, err)
	}
	s.dropNulls()
	return s, nil
}

// dropNulls drops what json makes of null records: readers without the key (status,
// history, doctor) see unsealed documents, which anyone may have edited.
func (s *State) dropNulls() {
	if s.Pods == nil {
		s.Pods = map[string]*Pod{}
	}
	if s.Alerts == nil {
		s.Alerts = map[string]*Alert{}
	}
	maps.DeleteFunc(s.Pods, func(_ string, p *Pod) bool { return p == nil })
	maps.DeleteFunc(s.Alerts, func(_ string, a *Alert) bool { return a == nil })
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
		// Something grew past reason: keep the newest half, of the restart history
		// last: losing the budget's ledger would restart more often than allowed;
		// every other loss errs towards restarting later or alerting again.
		switch {
		case len(s.Outbox) > 1:
			s.Outbox = s.Outbox[len(s.Outbox)/2:]
		case len(s.Episodes) > 1:
			s.Episodes = s.Episodes[len(s.Episodes)/2:]
		case len(s.WouldRestarts) > 1:
			s.WouldRestarts = s.WouldRestarts[len(s.WouldRestarts)/2:]
		case s.dropStalePods():
		case s.truncateStrings(maxStringBytes):
		// Then all but the ledger, one kind a pass: the outbox first (its payloads
		// cannot be cut) and what it would replay, the pods last, by halves.
		case len(s.Outbox) > 0:
			s.Outbox = nil
		case len(s.Episodes) > 0:
			s.Episodes = nil
		case len(s.WouldRestarts) > 0:
			s.WouldRestarts = nil
		case len(s.Alerts) > 0:
			s.Alerts = map[string]*Alert{}
		case len(s.Pods) > 0:
			s.dropOldestSeenHalf(slices.Collect(maps.Keys(s.Pods)))
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

// Prune applies the bounds: histories keep their newest within a count and an age.
func (s *State) Prune(now time.Time) {
	slices.SortStableFunc(s.Restarts, func(a, b Restart) int { return a.ClaimedAt.Compare(b.ClaimedAt) }) // as since needs
	s.Restarts = newest(s.Restarts, MaxRestarts)
	s.Episodes = newest(s.Episodes, MaxEpisodes)
	s.WouldRestarts = newest(s.WouldRestarts, MaxRestarts)
	s.Outbox = newest(s.Outbox, MaxOutbox)
	from := now.Add(-MaxHistoryAge)
	s.Restarts = since(s.Restarts, from, func(r Restart) time.Time { return r.ClaimedAt })
	s.WouldRestarts = since(s.WouldRestarts, from, func(w WouldRestart) time.Time { return w.At })
}

func since[T any](list []T, from time.Time, at func(T) time.Time) []T {
	for len(list) > 0 && at(list[0]).Before(from) {
		list = list[1:]
	}
	return list
}

func newest[T any](list []T, limit int) []T {
	if n := len(list); n > limit {
		return list[n-limit:]
	}
	return list
}

// Clone returns a deep copy, so a decision can be computed without touching its input.
// Not through JSON: a time keeps its monotonic reading (a pass's wedge clock and
// confirmation window measure elapsed time across its decisions), and any time copies.
func (s *State) Clone() *State {
	c := new(State)
	deepCopy(reflect.ValueOf(c).Elem(), reflect.ValueOf(s).Elem())
	return c
}

// deepCopy sets dst to a copy of src sharing no pointer, slice or map with it; a
// time.Time's location is shared, as times are values. Empty slices stay empty, not
// nil: "sinks": [] must not come back as null.
func deepCopy(dst, src reflect.Value) {
	switch k := src.Kind(); {
	case (k == reflect.Pointer || k == reflect.Slice || k == reflect.Map) && src.IsNil(),
		src.Type() == reflect.TypeFor[*time.Location]():
		dst.Set(src)
	case k == reflect.Pointer:
		dst.Set(reflect.New(src.Type().Elem()))
		deepCopy(dst.Elem(), src.Elem())
	case k == reflect.Struct:
		dst.Set(src) // unexported fields (a time's) by value
		for i := range src.NumField() {
			if src.Type().Field(i).IsExported() {
				deepCopy(dst.Field(i), src.Field(i))
			}
		}
	case k == reflect.Slice && src.Type().Elem().Kind() == reflect.Uint8:
		dst.SetBytes(bytes.Clone(src.Bytes())) // a payload, at once
	case k == reflect.Slice:
		dst.Set(reflect.MakeSlice(src.Type(), src.Len(), src.Len()))
		for i := range src.Len() {
			deepCopy(dst.Index(i), src.Index(i))
		}
	case k == reflect.Map:
		dst.Set(reflect.MakeMapWithSize(src.Type(), src.Len()))
		for it := src.MapRange(); it.Next(); {
			v := reflect.New(src.Type().Elem()).Elem()
			deepCopy(v, it.Value())
			dst.SetMapIndex(it.Key(), v)
		}
	default:
		dst.Set(src)
	}
}

// Duration is a time.Duration written as "4m0s" for people, and read only so.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string // null leaves it "": refused, not a wedge clock of 0
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	v, err := time.ParseDuration(s) // its error quotes s
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }
