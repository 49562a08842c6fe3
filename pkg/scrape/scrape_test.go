package scrape

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestScrapeHTTP(t *testing.T) {
	healthy := readFixture(t, "scheduler-metrics-healthy.txt")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })

	cases := []struct {
		name     string
		handler  http.HandlerFunc
		wantKind Kind
	}{
		{name: "healthy", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
			_, _ = w.Write([]byte(healthy))
		}},
		{name: "no content type", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header()["Content-Type"] = nil
			_, _ = w.Write([]byte(healthy))
		}},
		{name: "HTTP 500", wantKind: KindHTTPStatus, handler: func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}},
		{name: "HTML page", wantKind: KindNotMetrics, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html>" + healthy + "</html>"))
		}},
		{name: "redirect not followed", wantKind: KindHTTPStatus, handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://127.0.0.1:1/metrics", http.StatusFound)
		}},
		{name: "never answers", wantKind: KindTimeout, handler: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}},
		{name: "trickles", wantKind: KindTimeout, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			for i := 0; i < len(healthy); i++ {
				if _, err := w.Write([]byte{healthy[i]}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(50 * time.Millisecond):
				case <-r.Context().Done():
					return
				}
			}
		}},
		{name: "oversized", wantKind: KindTooLarge, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(healthy))
			filler := []byte(strings.Repeat("# filler comment line that is not ours\n", 1000))
			for i := 0; i < 100; i++ {
				if _, err := w.Write(filler); err != nil {
					return
				}
			}
		}},
		{name: "short of content-length", wantKind: KindTruncated, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "100000")
			_, _ = w.Write([]byte(healthy[:1000]))
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			s := NewScraper(500*time.Millisecond, 512<<10)
			start := time.Now()
			sample, err := s.Scrape(context.Background(), srv.URL+"/metrics")
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Errorf("scrape took %s despite a 500ms timeout", elapsed)
			}
			if tc.wantKind == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if sample.Ready() != 3 {
					t.Errorf("ready=%d", sample.Ready())
				}
				return
			}
			if KindOf(err) != tc.wantKind {
				t.Fatalf("want %s, got %v", tc.wantKind, err)
			}
		})
	}
}

func TestScrapeRefused(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	_, err := NewScraper(time.Second, 0).Scrape(context.Background(), url)
	if KindOf(err) != KindUnreachable {
		t.Fatalf("want unreachable, got %v", err)
	}
}

// Any cap the flag accepts reads a healthy page, up to the largest int64 (one
// past the cap must not wrap to a negative limit that reads nothing).
func TestScrapeCapSweep(t *testing.T) {
	healthy := readFixture(t, "scheduler-metrics-healthy.txt")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(healthy))
	}))
	defer srv.Close()
	for _, cap := range []int64{int64(len(healthy)), 1 << 20, 1<<62 + 1, math.MaxInt64 - 1, math.MaxInt64} {
		if _, err := NewScraper(5*time.Second, cap).Scrape(context.Background(), srv.URL); err != nil {
			t.Errorf("cap %d: %v", cap, err)
		}
	}
}

// A page over the cap is too large wherever the cap cuts it: in a line the
// watchdog reads, in one it skips, or between lines (a cut watched line is the
// cap's doing, not a truncated page).
func TestScrapeOverTheCapSweep(t *testing.T) {
	healthy := readFixture(t, "scheduler-metrics-healthy.txt")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(healthy))
	}))
	defer srv.Close()
	for limit := int64(1); limit < int64(len(healthy)); limit += 7 {
		if _, err := NewScraper(5*time.Second, limit).Scrape(context.Background(), srv.URL); KindOf(err) != KindTooLarge {
			t.Fatalf("limit %d of a %d-byte page: want %s, got %v", limit, len(healthy), KindTooLarge, err)
		}
	}
}
