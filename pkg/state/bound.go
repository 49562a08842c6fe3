package state

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"
)

// The last steps of Encode, for documents no ordinary state reaches (thousands of
// pods, giant reasons or payloads). Each reports whether it changed anything.

// maxStringBytes is what a free-text field keeps once the document is too big: far
// more than any reason the watchdog writes.
const maxStringBytes = 1024

// dropStalePods drops the older half of the pods not seen in the latest run: those
// not judged, whose record matters least.
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
	s.dropOldestSeenHalf(stale)
	return true
}

// dropOldestSeenHalf drops the older-seen half of the pods uids, by UID among equals.
func (s *State) dropOldestSeenHalf(uids []string) {
	slices.SortFunc(uids, func(a, b string) int {
		return cmp.Or(s.Pods[a].LastSeen.Compare(s.Pods[b].LastSeen), strings.Compare(a, b))
	})
	for _, uid := range uids[:(len(uids)+1)/2] {
		delete(s.Pods, uid)
	}
}

// dropLongKeys drops the records whose key is longer than n: an identifier that
// long cannot be a real one, and cut short it would match nothing.
func dropLongKeys[T any](m map[string]T, n int) bool {
	before := len(m)
	maps.DeleteFunc(m, func(k string, _ T) bool { return len(k) > n })
	return len(m) < before
}

// truncateStrings cuts every free-text field to n bytes. An identifier the watchdog
// matches on (pod UID, alert event) longer than that is not real: its record is dropped.
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
		cut(&a.Event, &a.Pod)
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
// UTF-8 character (reasons carry ≥, → and ✗). It is the project's one truncation.
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

// maxCorruptBytes bounds the copy of an unreadable document kept beside it (maxEncodedBytes).
const maxCorruptBytes = 256 << 10

// BoundCorrupt keeps the start of an unreadable document, saying how much was cut.
func BoundCorrupt(raw string) string {
	if len(raw) <= maxCorruptBytes {
		return raw
	}
	return Truncate(raw, maxCorruptBytes-200) + fmt.Sprintf("\n[watchdog: the first %d of %d bytes kept]\n", maxCorruptBytes-200, len(raw))
}
