package state

import (
	"fmt"
	"sort"
	"unicode/utf8"
)

// The last steps of Encode, for documents no ordinary state reaches: thousands of
// pods (a selector gone wide before --max-pods, or a hand edit), giant reasons or
// payloads. Each step returns whether it changed anything; Encode re-encodes after
// each and stops as soon as the document fits.

// maxStringBytes is what a free-text field keeps once the document is too big:
// far more than any reason the watchdog writes (it truncates to 500).
const maxStringBytes = 1024

// dropStalePods drops the older half of the pods not seen in the latest run (their
// LastSeen is before the newest LastSeen in the document). A pod judged this run
// has the newest LastSeen; the others are standbys or pods that were not judged,
// whose record matters least.
func (s *State) dropStalePods() bool {
	var newest int64
	for _, p := range s.Pods {
		newest = max(newest, p.LastSeen.UnixNano())
	}
	var stale []string
	for uid, p := range s.Pods {
		if p.LastSeen.UnixNano() < newest {
			stale = append(stale, uid)
		}
	}
	if len(stale) == 0 {
		return false
	}
	sortByLastSeen(s, stale)
	for _, uid := range stale[:(len(stale)+1)/2] {
		delete(s.Pods, uid)
	}
	return true
}

// sortByLastSeen orders pod UIDs oldest-seen first (by UID among equals, so the
// result does not depend on map order).
func sortByLastSeen(s *State, uids []string) {
	sort.Slice(uids, func(i, j int) bool {
		a, b := s.Pods[uids[i]].LastSeen, s.Pods[uids[j]].LastSeen
		if !a.Equal(b) {
			return a.Before(b)
		}
		return uids[i] < uids[j]
	})
}

// dropLongKeys drops the records whose key is longer than n: an identifier that long
// (a pod UID, an alert event name) cannot be a real one, and cutting it would make it
// match nothing.
func dropLongKeys[T any](m map[string]T, n int) bool {
	dropped := false
	for k := range m {
		if len(k) > n {
			delete(m, k)
			dropped = true
		}
	}
	return dropped
}

// truncateStrings cuts every free-text field to n bytes. Identifiers the watchdog
// matches on (pod UIDs, alert event names) are not free text: a longer one cannot
// be a real one (a UID has 36 characters), and its record is dropped instead.
func (s *State) truncateStrings(n int) bool {
	changed := false
	cut := func(fields ...*string) {
		for _, p := range fields {
			if len(*p) > n {
				*p = Truncate(*p, n)
				changed = true
			}
		}
	}
	changed = dropLongKeys(s.Pods, n) || changed
	changed = dropLongKeys(s.Alerts, n) || changed
	for _, p := range s.Pods {
		cut(&p.Name, (*string)(&p.LastVerdict))
		if e := p.Episode; e != nil {
			cut((*string)(&e.Kind), (*string)(&e.Evidence))
		}
	}
	for i := range s.Restarts {
		r := &s.Restarts[i]
		cut(&r.Pod, &r.Method, (*string)(&r.Outcome), &r.Reason, (*string)(&r.Evidence), &r.Error)
	}
	for i := range s.WouldRestarts {
		w := &s.WouldRestarts[i]
		cut(&w.Pod, &w.UID, &w.Reason, (*string)(&w.Evidence), &w.Gates)
	}
	for i := range s.Episodes {
		e := &s.Episodes[i]
		cut(&e.Pod, &e.UID, (*string)(&e.Kind), (*string)(&e.Evidence), (*string)(&e.Outcome))
	}
	for _, a := range s.Alerts {
		cut(&a.Event, &a.Pod, &a.Reason)
	}
	for i := range s.Outbox {
		cut(&s.Outbox[i].LastError)
	}
	if r := s.LastRun; r != nil {
		cut((*string)(&r.Verdict), (*string)(&r.Action), &r.Reason, (*string)(&r.Outcome), &r.Error, &r.Watchdog)
	}
	return changed
}

// Truncate shortens s to at most n bytes, ending in "...", without splitting a
// UTF-8 character (reasons carry ≥, → and ✗). It is the project's one truncation:
// state fields, alert payloads and run summaries all cut with it.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := max(n-3, 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// dropAllButLedger drops, one kind of record per call: the outbox (its payloads
// cannot be cut) and the memory of what it delivered, ended episodes, shadow mode's would-restarts, open alerts, then the newest-seen half of the
// pods judged this run (and so on, halving). Only the restart history is left,
// with every field already cut short.
func (s *State) dropAllButLedger() bool {
	switch {
	case len(s.Outbox) > 0:
		s.Outbox = nil
	case len(s.Delivered) > 0:
		// Without the outbox, there is nothing left to replay.
		s.Delivered = nil
	case len(s.Episodes) > 0:
		s.Episodes = nil
	case len(s.WouldRestarts) > 0:
		s.WouldRestarts = nil
	case len(s.Alerts) > 0:
		s.Alerts = map[string]*Alert{}
	case len(s.Pods) > 0:
		uids := make([]string, 0, len(s.Pods))
		for uid := range s.Pods {
			uids = append(uids, uid)
		}
		sortByLastSeen(s, uids)
		for _, uid := range uids[:(len(uids)+1)/2] {
			delete(s.Pods, uid)
		}
	default:
		return false
	}
	return true
}

// maxCorruptBytes bounds the copy of an unreadable document kept under statestore.CorruptKey:
// with the document itself (maxEncodedBytes), the ConfigMap stays well below 1 MiB.
const maxCorruptBytes = 256 << 10

// BoundCorrupt keeps the start of an unreadable document, enough for a person to
// see what it was, and says how much was cut (pkg/statestore keeps it).
func BoundCorrupt(raw string) string {
	if len(raw) <= maxCorruptBytes {
		return raw
	}
	return Truncate(raw, maxCorruptBytes-200) + fmt.Sprintf("\n[watchdog: the first %d of %d bytes kept]\n", maxCorruptBytes-200, len(raw))
}
