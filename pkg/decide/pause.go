package decide

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// The pause: annotations on the scheduler Deployment that hold every restart until
// an expiry; the watchdog still judges and pages (docs/design.md, "Pause").
const (
	PauseUntilAnnotation  = "watchdog.agentenv.io/paused-until"
	PauseReasonAnnotation = "watchdog.agentenv.io/pause-reason"
	// MaxPause is how far ahead a pause may end: a forgotten one must not turn
	// healing off for good.
	MaxPause       = 7 * 24 * time.Hour
	maxPauseReason = 512 // the reason is carried into every alert
	// GatePaused holds a due restart while the Deployment is paused.
	GatePaused = "paused"
)

// Pause is an active pause.
type Pause struct {
	Deployment string    `json:"deployment"`
	Reason     string    `json:"reason"`
	Until      time.Time `json:"until"`
}

// String is how status, history, doctor and the alerts say it.
func (p *Pause) String() string {
	return fmt.Sprintf("paused until %s by annotation on Deployment %s: %s", p.Until.UTC().Format(time.RFC3339), p.Deployment, p.Reason)
}

// ReadPause reads the pause annotations of a Deployment at now: the active pause,
// or nil; and a note on annotations that make no valid pause (ignored) or end more
// than MaxPause after since, when they were first seen (capped there).
func ReadPause(deployment string, ann map[string]string, now, since time.Time) (*Pause, string) {
	untilText, hasUntil := ann[PauseUntilAnnotation]
	reason, hasReason := ann[PauseReasonAnnotation]
	if !hasUntil && !hasReason {
		return nil, ""
	}
	ignored := func(format string, a ...any) (*Pause, string) {
		return nil, fmt.Sprintf("pause annotation on Deployment %s ignored: ", deployment) + fmt.Sprintf(format, a...)
	}
	reason = strings.TrimSpace(reason)
	switch {
	case !hasUntil:
		return ignored("no %s: a pause needs an expiry (an RFC 3339 time, at most %s ahead)", PauseUntilAnnotation, ShortDuration(MaxPause))
	case reason == "":
		return ignored("no %s: a pause needs a reason, for whoever is paged while it lasts", PauseReasonAnnotation)
	case len(reason) > maxPauseReason:
		return ignored("%s is longer than %d bytes", PauseReasonAnnotation, maxPauseReason)
	}
	until, err := time.Parse(time.RFC3339, strings.TrimSpace(untilText))
	if len(untilText) > 64 { // from here on it is only quoted in a message
		untilText = untilText[:64] + "…"
	}
	capped := since.Add(MaxPause)
	switch {
	case err != nil:
		return ignored("%s %q is not an RFC 3339 time (like %s)", PauseUntilAnnotation, untilText, now.Add(2*time.Hour).UTC().Truncate(time.Minute).Format(time.RFC3339))
	case !until.After(now):
		return ignored(pauseExpired+" %s (%s)", until.UTC().Format(time.RFC3339), reason)
	case until.After(capped) && !capped.After(now):
		return ignored("%s %s was more than %s ahead: capped at %s, passed", PauseUntilAnnotation, until.UTC().Format(time.RFC3339), ShortDuration(MaxPause), capped.UTC().Format(time.RFC3339))
	case until.After(capped):
		return &Pause{Deployment: deployment, Reason: reason, Until: capped}, fmt.Sprintf("pause annotation on Deployment %s: %s %s is more than %s ahead: capped at %s",
			deployment, PauseUntilAnnotation, until.UTC().Format(time.RFC3339), ShortDuration(MaxPause), capped.UTC().Format(time.RFC3339))
	}
	return &Pause{Deployment: deployment, Reason: reason, Until: until}, ""
}

// runPause is the run's pause: from the Deployment as read before a restart, if it
// was, capped MaxPause after s first noted the same annotations.
func runPause(obs Observation, s *state.State) (*Pause, string, string) {
	name, ann := "", map[string]string(nil)
	if r := obs.Rollout; r != nil && r.Found && r.Err == nil {
		name, ann = r.Name, r.Annotations
	} else if d := obs.Ownership; d != nil {
		name, ann = d.Deployment, d.Annotations
	}
	sum := sha256.Sum256([]byte(ann[PauseUntilAnnotation] + "\n" + ann[PauseReasonAnnotation]))
	key, since := hex.EncodeToString(sum[:8]), obs.At
	if n := s.PauseNotice; n != nil && n.Key == key {
		since = n.Since
	}
	p, note := ReadPause(name, ann, obs.At, since)
	return p, note, key
}

// pauseExpired says a pause ended as meant: warned about, never told as invalid.
const pauseExpired = "expired at"

// notePause records, once per annotation, why it was ignored or capped (res.PauseNotice).
// Unread annotations (a failed read or sample) keep the notice and its cap's start.
func notePause(next *state.State, res *Result, obs Observation) {
	d, r := obs.Ownership, obs.Rollout
	if (obs.unseen || d == nil || d.Err != nil) && (r == nil || !r.Found || r.Err != nil) {
		return
	}
	var note, key string
	if res.Pause, note, key = runPause(obs, next); note == "" {
		next.PauseNotice = nil
		return
	}
	res.Warnings = append(res.Warnings, note)
	if n := next.PauseNotice; (n == nil || n.Key != key) && !strings.Contains(note, "ignored: "+pauseExpired) {
		next.PauseNotice, res.PauseNotice = &state.PauseNotice{Key: key, Since: obs.At}, note
	}
}

// pauseGate holds a due restart while the Deployment, as read just before the
// restart, is paused. Held this way it is blocked and pages: whoever is paged must
// know the scheduler is wedged anyway. An ignored pause passes, saying why.
func pauseGate(p *judgedPod) Gate {
	if r := p.obs.Rollout; r == nil || !r.Found || r.Err != nil {
		return Gate{} // the rollout gate refuses, or there is no Deployment to annotate
	}
	switch active, ignored, _ := runPause(p.obs, p.state); {
	case active != nil:
		return Gate{Name: GatePaused, Detail: "paused: would restart; " + active.String()}
	case ignored != "":
		return Gate{Name: GatePaused, OK: true, Detail: ignored}
	}
	return Gate{}
}
