// Package outbox keeps what a run could not deliver, in the state ConfigMap, for the
// next run to retry. Anyone who may edit that ConfigMap can write entries too, so an
// entry is sealed and rebuilt, never sent as stored (docs/alerts.md, "The outbox").
// A new field of Notification is a fact unless Open fills it in: kept, sealed, checked.
package outbox

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// Config is what the dispatcher needs to seal and rebuild outbox entries.
type Config struct {
	// Key seals new entries and authenticates retried ones; empty: entries are
	// rebuilt but cannot be authenticated.
	Key    []byte
	Source alert.Source // put back on a retried alert: the outbox does not keep it
}

// MaxPendingAge is how long an undelivered alert is retried before it is dropped:
// a day-old page helps nobody.
const MaxPendingAge = 24 * time.Hour

// Bounds of a retried notification's facts: generous for what the watchdog
// writes, small enough that an entry it did not write says little.
const (
	sealPrefix = "hmac-sha256:" // the seal's algorithm and version
	maxReason  = 4000
	maxWordLen = 64 // verdict, action, evidence
)

var (
	// A pod name (DNS subdomain), a UID and the words of the decision's vocabulary.
	podName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
	uidText = regexp.MustCompile(`^[0-9A-Za-z._-]{1,64}$`)
	word    = regexp.MustCompile(`^[a-z][a-z-]*$`)
)

// Pending makes the outbox entry of n, sealed when there is a key.
func (c Config) Pending(n alert.Notification, now time.Time, sinks []string, lastErr string) (state.Pending, error) {
	// Its facts only, without what Open fills in.
	facts := n
	facts.SchemaVersion, facts.Severity, facts.NextStep = 0, "", ""
	alert.Source{}.Stamp(&facts)
	payload, err := json.Marshal(facts)
	if err != nil {
		return state.Pending{}, fmt.Errorf("encode pending alert: %w", err)
	}
	p := state.Pending{ID: n.ID, Event: n.Event, CreatedAt: now.UTC(), Attempts: 1, Sinks: sinks, LastError: lastErr, Payload: payload}
	if len(c.Key) > 0 {
		p.Seal = c.Seal(p, payload)
	}
	return p, nil
}

// Seal is the MAC of an entry: its identity, the namespace it was written for,
// and its facts (payload, as encoded by json.Marshal of the stored notification).
func (c Config) Seal(p state.Pending, payload []byte) string {
	mac := hmac.New(sha256.New, c.Key)
	fmt.Fprintf(mac, "agentenv-watchdog outbox v1\n%s\n%s\n%s\n%s\n", c.Source.Namespace, p.ID, p.Event, p.CreatedAt.UTC().Format(time.RFC3339Nano))
	mac.Write(payload)
	return sealPrefix + hex.EncodeToString(mac.Sum(nil))
}

// Why an entry is not authenticated.
var (
	errUnsealed = errors.New("not sealed with this watchdog's --outbox-key: written by someone else, or under another key (a rotated key drops what the old one sealed)")
	errNoSeal   = errors.New("not sealed at all: kept by a run without --outbox-key (0.1.0, before the upgrade, sealed nothing; so does a run by hand without the key), or written by someone else")
)

// Open returns the notification an outbox entry stands for, rebuilt, or why the
// entry is dropped. With a key it authenticates the entry first: an entry is judged
// (even its age) only after its seal, so a forgery is reported as one. Facts the
// watchdog never writes are refused in errors that never repeat the entry's text
// (those a later build sealed are left out of the alert);
// an authenticated entry's time is not checked (a node whose clock ran ahead must
// not lose the page; its sealed createdAt bounds its age).
func (c Config) Open(p state.Pending, now time.Time) (n alert.Notification, authenticated bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(p.Payload))
	dec.DisallowUnknownFields()
	sealedAsWritten := false
	if err := dec.Decode(&n); err != nil || dec.More() {
		// A fact this build does not know is a later build's (after a rollback) when the
		// seal covers the payload as written, re-indented at most.
		var written bytes.Buffer
		sealedAsWritten = len(c.Key) > 0 && p.Seal != "" && json.Compact(&written, p.Payload) == nil &&
			hmac.Equal([]byte(p.Seal), []byte(c.Seal(p, written.Bytes()))) && json.Unmarshal(p.Payload, &n) == nil
		if !sealedAsWritten {
			// Not the decoder's message: it quotes the entry (an unknown field's name).
			return n, false, errors.New("not a notification as the watchdog writes one (unreadable, or with fields it never writes)")
		}
	}
	// Sealed as json.Marshal writes them: the document may have been re-indented.
	facts, err := json.Marshal(n)
	if err != nil {
		return n, false, fmt.Errorf("re-encode: %w", err)
	}
	if len(c.Key) > 0 {
		if p.Seal == "" {
			return n, false, errNoSeal
		}
		if !sealedAsWritten && !hmac.Equal([]byte(p.Seal), []byte(c.Seal(p, facts))) {
			return n, false, errUnsealed
		}
		authenticated = true
	}
	if now.Sub(p.CreatedAt) > MaxPendingAge {
		// Not its lastError or sinks: no seal covers them.
		return n, authenticated, fmt.Errorf("undelivered after %d attempts over %s (each failed attempt was logged, "+
			"with a Warning Event, when it happened)", p.Attempts, MaxPendingAge)
	}
	spec, known := alert.Lookup(n.Event)
	switch {
	case !known:
		return n, authenticated, fmt.Errorf("not an event of the watchdog's")
	case n.Event != p.Event:
		return n, authenticated, fmt.Errorf("its notification is a %s, the entry says otherwise", n.Event)
	case n.ID != p.ID:
		return n, authenticated, fmt.Errorf("its notification's id differs from the entry's")
	case spec.Name == alert.EventTest || n.Test:
		return n, authenticated, fmt.Errorf("a test alert is never kept for retry")
	case n.DryRun:
		return n, authenticated, fmt.Errorf("a dry run sends nothing")
	case n.Pod != "" && !podName.MatchString(n.Pod):
		return n, authenticated, fmt.Errorf("its pod is not a pod name")
	case n.UID != "" && !uidText.MatchString(n.UID):
		return n, authenticated, fmt.Errorf("uid is not a UID")
	case !authenticated && (n.Time.After(now.Add(time.Minute)) || n.Time.Before(now.Add(-MaxPendingAge-time.Hour))):
		return n, authenticated, fmt.Errorf("its time %s is not of the last day", n.Time.UTC().Format(time.RFC3339))
	case strings.ContainsAny(n.Reason, "\x00"):
		return n, authenticated, fmt.Errorf("its reason holds a NUL")
	}
	for name, w := range map[string]string{"verdict": n.Verdict, "action": n.Action, "evidence": n.Evidence} {
		if w != "" && (len(w) > maxWordLen || !word.MatchString(w)) {
			return n, authenticated, fmt.Errorf("its %s is not a word of the watchdog's", name)
		}
	}
	for _, cl := range n.Closes {
		if _, ok := alert.Lookup(cl.Event); !ok || (cl.Pod != "" && !podName.MatchString(cl.Pod)) {
			return n, authenticated, fmt.Errorf("it closes an alert the watchdog never opens")
		}
	}
	n.SchemaVersion, n.Severity, n.NextStep = alert.SchemaVersion, spec.Severity, spec.NextStep
	c.Source.Stamp(&n)
	n.Reason = state.Truncate(n.Reason, maxReason)
	return n, authenticated, nil
}
