package scrape

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseAndResolveVia(t *testing.T) {
	for _, c := range []struct {
		in           string
		inPod, other Via
	}{
		{"auto", ViaDirect, ViaAPIServer},
		{"direct", ViaDirect, ViaDirect},
		{"apiserver", ViaAPIServer, ViaAPIServer},
	} {
		v, err := ParseVia(c.in)
		if err != nil {
			t.Fatalf("ParseVia(%q): %v", c.in, err)
		}
		if got := v.Resolve(true); got != c.inPod {
			t.Errorf("%s in a pod resolves to %s, want %s", c.in, got, c.inPod)
		}
		if got := v.Resolve(false); got != c.other {
			t.Errorf("%s outside a pod resolves to %s, want %s", c.in, got, c.other)
		}
	}
	for _, bad := range []string{"", "Auto", "proxy", "direct "} {
		if _, err := ParseVia(bad); err == nil {
			t.Errorf("ParseVia(%q) accepted", bad)
		}
	}
}

// headerTransport stands in for client-go's authenticated transport: it adds a
// header the server checks, as a bearer token would be.
type headerTransport struct{ base http.RoundTripper }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer test")
	return h.base.RoundTrip(r)
}

// A proxied scraper goes through the transport it is given, keeps the direct
// scraper's bounds (time, size, no redirects), and reports the API server's Status
// message when it refuses.
func TestProxiedScraper(t *testing.T) {
	healthy := readFixture(t, "scheduler-metrics-healthy.txt")
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer test" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"kind":"Status","status":"Failure","message":"pods \"p\" is forbidden: User \"u\" cannot get resource \"pods/proxy\"","reason":"Forbidden","code":403}`))
			return
		}
		switch r.URL.Path {
		case "/ok":
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			_, _ = w.Write([]byte(healthy))
		case "/refused":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"kind":"Status","status":"Failure","message":"address not allowed","reason":"BadRequest","code":400}`))
		case "/slow":
			<-release
		case "/big":
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write([]byte(healthy + "# one line more\n"))
		case "/redirect":
			http.Redirect(w, r, "/ok", http.StatusFound)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for /slow
	ctx := context.Background()
	s := NewProxiedScraper(headerTransport{http.DefaultTransport}, 300*time.Millisecond, int64(len(healthy)))

	if _, err := s.Scrape(ctx, srv.URL+"/ok"); err != nil {
		t.Errorf("through the transport: %v", err)
	}
	for path, want := range map[string]struct {
		kind Kind
		text string
	}{
		"/refused":  {KindHTTPStatus, "address not allowed"},
		"/slow":     {KindTimeout, ""},
		"/big":      {KindTooLarge, ""},
		"/redirect": {KindHTTPStatus, "302"},
	} {
		_, err := s.Scrape(ctx, srv.URL+path)
		if KindOf(err) != want.kind || !strings.Contains(err.Error(), want.text) {
			t.Errorf("%s: got %v, want kind %s with %q", path, err, want.kind, want.text)
		}
	}
	// Without the transport the server refuses: the message is the API server's.
	_, err := NewProxiedScraper(http.DefaultTransport, time.Second, int64(len(healthy))).Scrape(ctx, srv.URL+"/ok")
	if KindOf(err) != KindHTTPStatus || !strings.Contains(err.Error(), `cannot get resource "pods/proxy"`) {
		t.Errorf("forbidden: got %v", err)
	}
}
