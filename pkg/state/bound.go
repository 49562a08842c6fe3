package state

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
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
	stale := slices.DeleteFunc(slices.Collect(maps.Keys(s.Pods)),
		func(uid string) bool { return s.Pods[uid].LastSeen.UnixNano() == newest })
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

// truncateStrings cuts every string in the document to n bytes, and drops the records
// keyed longer: an identifier that long is not real, and cut short it would match nothing.
func (s *State) truncateStrings(n int) bool {
	return cutStrings(reflect.ValueOf(s).Elem(), n)
}

func cutStrings(v reflect.Value, n int) (changed bool) {
	switch v.Kind() {
	case reflect.String:
		if v.Len() > n {
			v.SetString(Truncate(v.String(), n))
			return true
		}
	case reflect.Pointer:
		return !v.IsNil() && cutStrings(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			changed = v.Type().Field(i).IsExported() && cutStrings(v.Field(i), n) || changed
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			break // a payload: it cannot be cut
		}
		for i := range v.Len() {
			changed = cutStrings(v.Index(i), n) || changed
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if it.Key().Len() > n {
				v.SetMapIndex(it.Key(), reflect.Value{})
				changed = true
			} else {
				changed = cutStrings(it.Value(), n) || changed
			}
		}
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
