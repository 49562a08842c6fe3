package httpbound

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestClientCutsTheBody: a body of up to limit bytes reads whole; one byte more
// fails with ErrTooLarge, after limit bytes, whatever the answer's length.
func TestClientCutsTheBody(t *testing.T) {
	const limit = 1000
	for _, size := range []int{0, 1, limit - 1, limit, limit + 1, 10 * limit, 1 << 20} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("a", size))
		}))
		resp, err := Client(nil, limit).Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		if size <= limit && (err != nil || len(got) != size) {
			t.Errorf("size %d: read %d, %v; want it whole", size, len(got), err)
		}
		if size > limit && (!errors.Is(err, ErrTooLarge) || len(got) != limit) {
			t.Errorf("size %d: read %d, %v; want %d and ErrTooLarge", size, len(got), err, limit)
		}
	}
}

// TestClientKeepsAReadError: a body of exactly limit bytes cut short of its
// Content-Length fails as cut short, not as a complete answer.
func TestClientKeepsAReadError(t *testing.T) {
	const limit = 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "2000")
		_, _ = io.WriteString(w, strings.Repeat("a", limit))
	}))
	defer srv.Close()
	resp, err := Client(nil, limit).Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(got) != limit {
		t.Errorf("read %d, %v; want %d and io.ErrUnexpectedEOF", len(got), err, limit)
	}
}

// TestClientBoundsTheHeaders: an answer whose headers pass MaxHeaderBytes fails,
// with the default transport and with one the caller built.
func TestClientBoundsTheHeaders(t *testing.T) {
	for _, size := range []int{MaxHeaderBytes / 2, 2 * MaxHeaderBytes} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("X-Big", strings.Repeat("h", size))
		}))
		for name, base := range map[string]http.RoundTripper{"default": nil, "own": &http.Transport{}} {
			resp, err := Client(base, 1000).Get(srv.URL)
			if err == nil {
				resp.Body.Close()
			}
			if (err == nil) != (size < MaxHeaderBytes) {
				t.Errorf("%s transport, a %d-byte header: %v", name, size, err)
			}
		}
		srv.Close()
	}
}
