package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPushBoundsTheAnswer: a Pushgateway (or whatever answers at its URL) that
// sends a huge error body must not make the run allocate it: the 64 Mi CronJob pod
// would be OOM-killed on every run. The answer is read up to a small bound, and
// the error the run logs stays small.
func TestPushBoundsTheAnswer(t *testing.T) {
	chunk := strings.Repeat("x", 64<<10)
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		for range 48 << 20 / len(chunk) { // 48 MiB
			n, err := w.Write([]byte(chunk))
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	err := New(Options{}).Push(context.Background(), PushConfig{URL: srv.URL, Job: "watchdog", Timeout: 10 * time.Second})
	if err == nil {
		t.Fatal("a 500 answer pushed without error")
	}
	if len(err.Error()) > 8<<10 {
		t.Errorf("the error holds %d bytes of the answer; want it bounded (a few KiB)", len(err.Error()))
	}
}

// TestPushRefusesRedirects: the watchdog pushes to the Pushgateway it was given,
// not to wherever an answer points.
func TestPushRefusesRedirects(t *testing.T) {
	var elsewhere atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	defer other.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+r.URL.Path, code)
		}))
		err := New(Options{}).Push(context.Background(), PushConfig{URL: srv.URL, Job: "watchdog", Timeout: 5 * time.Second})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("%d: push error %v, want a refused redirect", code, err)
		}
	}
	if n := elsewhere.Load(); n > 0 {
		t.Errorf("the redirect target received %d request(s)", n)
	}
}
