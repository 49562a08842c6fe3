package evidence

import (
	"strings"
	"testing"
	"time"
)

// TestRingKeepsTheNewest: the ConfigMap keeps the newest MaxBundles bundles and
// stays under its size bound however large the bundles, and leaves keys that are
// no bundle's alone.
func TestRingKeepsTheNewest(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	data := map[string]string{"README": "kept"}
	var keys []string
	for i := range 8 {
		k := Key(t0.Add(time.Duration(i)*time.Minute), "p")
		keys = append(keys, k)
		data = ring(data, k, "{}")
	}
	if len(data) != MaxBundles+1 || data["README"] != "kept" {
		t.Fatalf("ring holds %d keys: %v", len(data), data)
	}
	for i, k := range keys {
		if _, ok := data[k]; ok != (i >= len(keys)-MaxBundles) {
			t.Errorf("bundle %d (%s) kept: %v", i, k, ok)
		}
	}
	// Bundles at the log bound: the ring drops the oldest to stay under its size.
	big := strings.Repeat("x", DefaultLogBytes*3)
	data = nil
	for i := range MaxBundles {
		data = ring(data, Key(t0.Add(time.Duration(i)*time.Minute), "p"), big)
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > maxRingBytes || len(data) == 0 {
		t.Errorf("ring of %d bundles, %d bytes, bound %d", len(data), size, maxRingBytes)
	}
	if _, ok := data[Key(t0.Add(time.Duration(MaxBundles-1)*time.Minute), "p")]; !ok {
		t.Error("the newest bundle was dropped")
	}
}

// TestKeysSortByTime: keys sort as their times do, across days and months.
func TestKeysSortByTime(t *testing.T) {
	a := Key(time.Date(2026, 9, 30, 23, 59, 59, 0, time.UTC), "zz")
	b := Key(time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), "aa")
	if a >= b {
		t.Errorf("%s sorts after %s", a, b)
	}
}
