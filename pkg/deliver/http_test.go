package deliver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"
	"golang.org/x/net/http/httpproxy"
)

// secretPath looks like a Slack webhook path: for webhooks the URL is the secret.
const secretPath = "/services/T000/B000/XXXXSECRET"

// recorder is a loopback receiver whose answer is chosen per request.
type recorder struct {
	*httptest.Server
	mu     sync.Mutex
	hits   []time.Time
	bodies []string
	paths  []string
	answer func(n int, w http.ResponseWriter, r *http.Request)
}

func newRecorder(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request)) *recorder {
	t.Helper()
	rec := &recorder{answer: answer}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.hits = append(rec.hits, time.Now())
		rec.bodies = append(rec.bodies, r.Method+" "+string(body))
		rec.paths = append(rec.paths, r.URL.Path)
		n := len(rec.hits)
		rec.mu.Unlock()
		rec.answer(n, w, r)
	}))
	t.Cleanup(rec.Close)
	return rec
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hits)
}

func (r *recorder) times() []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.hits...)
}

func (r *recorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...)
}

// noSecret fails if err leaks the secret part of the URL.
func noSecret(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range []string{"XXXXSECRET", "/services/", "T000"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error leaks the URL (%q): %v", s, err)
		}
	}
}

// attempts records what a poster's retry loop did: each attempt, and each wait it
// chose before the next. Tests assert these, not wall-clock durations, so that a
// loaded machine cannot fail them.
type attempts struct {
	mu    sync.Mutex
	n     int
	waits []time.Duration
}

func observe(p *Poster) *attempts {
	a := &attempts{}
	p.client.RequestLogHook = func(_ retryablehttp.Logger, _ *http.Request, _ int) {
		a.mu.Lock()
		a.n++
		a.mu.Unlock()
	}
	backoff := p.client.Backoff
	p.client.Backoff = func(lo, hi time.Duration, n int, resp *http.Response) time.Duration {
		d := backoff(lo, hi, n, resp)
		a.mu.Lock()
		a.waits = append(a.waits, d)
		a.mu.Unlock()
		return d
	}
	return a
}

func (a *attempts) get() (int, []time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n, append([]time.Duration(nil), a.waits...)
}

func TestPosterSuccess(t *testing.T) {
	rec := newRecorder(t, func(int, http.ResponseWriter, *http.Request) {})
	p := NewPoster("webhook", rec.URL+secretPath, time.Second, 3, 5*time.Second)
	h := http.Header{}
	h.Set("X-Test", "1")
	if err := p.Post(context.Background(), []byte(`{"a":1}`), h); err != nil {
		t.Fatal(err)
	}
	if got := rec.requests(); len(got) != 1 || got[0] != `POST {"a":1}` {
		t.Errorf("requests %q", got)
	}
}

func TestPoster500RetriedThenFails(t *testing.T) {
	rec := newRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "upstream exploded", http.StatusInternalServerError)
	})
	p := NewPoster("webhook", rec.URL+secretPath, time.Second, 3, 10*time.Second)
	tries := observe(p)
	start := time.Now()
	err := p.Post(context.Background(), []byte(`{}`), nil)
	took := time.Since(start)
	if err == nil {
		t.Fatal("a 500 counted as delivered")
	}
	if rec.count() != 3 {
		t.Errorf("%d attempts, want 3", rec.count())
	}
	if !strings.HasPrefix(err.Error(), "webhook: ") || !strings.Contains(err.Error(), "500 Internal Server Error") {
		t.Errorf("unclear error: %v", err)
	}
	t.Logf("after 3 × 500: %v", err)
	// Back-off between attempts: 0.5 s then 1 s, and it was waited.
	if _, waits := tries.get(); len(waits) != 2 || waits[0] != 500*time.Millisecond || waits[1] != time.Second || took < 1500*time.Millisecond {
		t.Errorf("waits %v, took %s, want 0.5 s then 1 s of back-off", waits, took)
	}
	// A 4xx other than 429 is final: no retry.
	rec4 := newRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no_service", http.StatusNotFound)
	})
	err = NewPoster("slack", rec4.URL+secretPath, time.Second, 3, 10*time.Second).Post(context.Background(), []byte(`{}`), nil)
	if err == nil || rec4.count() != 1 || !strings.Contains(err.Error(), `404 Not Found: "no_service"`) {
		t.Errorf("404: %d attempts, error %v", rec4.count(), err)
	}
	noSecret(t, err)
}

func TestPoster429RetryAfterHonoured(t *testing.T) {
	rec := newRecorder(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	p := NewPoster("slack", rec.URL+secretPath, time.Second, 3, 10*time.Second)
	tries := observe(p)
	if err := p.Post(context.Background(), []byte(`{}`), nil); err != nil {
		t.Fatalf("not delivered after the 429: %v", err)
	}
	hits := rec.times()
	if len(hits) != 2 {
		t.Fatalf("%d requests, want 2", len(hits))
	}
	// Without Retry-After the first back-off is 0.5 s: 1 s proves the header ruled.
	if _, waits := tries.get(); len(waits) != 1 || waits[0] != time.Second || hits[1].Sub(hits[0]) < time.Second {
		t.Errorf("waits %v, retried after %s, want 1 s (Retry-After: 1)", waits, hits[1].Sub(hits[0]))
	}
}

func TestPoster429RetryAfterBeyondBudgetGivesUp(t *testing.T) {
	rec := newRecorder(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	p := NewPoster("slack", rec.URL+secretPath, time.Second, 3, 2*time.Second)
	tries := observe(p)
	err := p.Post(context.Background(), []byte(`{}`), nil)
	if _, waits := tries.get(); len(waits) != 0 {
		t.Errorf("waited %v although Retry-After exceeds the 2 s budget", waits)
	}
	if err == nil || !strings.Contains(err.Error(), "429 Too Many Requests (Retry-After 30)") {
		t.Errorf("error %v", err)
	}
	if rec.count() != 1 {
		t.Errorf("%d attempts, want 1", rec.count())
	}
	noSecret(t, err)
	t.Logf("Retry-After beyond the budget: %v", err)

	// The caller's deadline counts too, not only the poster's budget.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p = NewPoster("slack", rec.URL+secretPath, time.Second, 3, time.Minute)
	tries = observe(p)
	if err := p.Post(ctx, []byte(`{}`), nil); err == nil {
		t.Error("caller deadline: no error")
	}
	if n, waits := tries.get(); n != 1 || len(waits) != 0 {
		t.Errorf("caller deadline: %d attempts, waits %v, want 1 attempt and no wait", n, waits)
	}
}

func TestPosterNeverAnswers(t *testing.T) {
	release := make(chan struct{})
	rec := newRecorder(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	defer close(release)

	// The attempt timeout cuts each attempt: with a budget of 20 s, an attempt that
	// was not cut would use it all and leave no room for the second. No upper bound
	// on the time taken: a loaded machine is slow, not wrong.
	p := NewPoster("webhook", rec.URL+secretPath, 200*time.Millisecond, 2, 20*time.Second)
	tries := observe(p)
	start := time.Now()
	err := p.Post(context.Background(), []byte(`{}`), nil)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Errorf("error %v, want a timeout", err)
	}
	t.Logf("never answers: %v (%s)", err, took)
	if n, waits := tries.get(); n != 2 || len(waits) != 1 || took < 2*200*time.Millisecond+waits[0] {
		t.Errorf("%d attempts, waits %v in %s, want 2 attempts of 200 ms and one wait", n, waits, took)
	}
	noSecret(t, err)

	// The budget cuts the whole delivery: the first attempt, whose own timeout is a
	// minute, ends with the 700 ms budget, and no retry follows.
	p = NewPoster("webhook", rec.URL+secretPath, time.Minute, 3, 700*time.Millisecond)
	tries = observe(p)
	start = time.Now()
	err = p.Post(context.Background(), []byte(`{}`), nil)
	took = time.Since(start)
	if n, waits := tries.get(); err == nil || n != 1 || len(waits) != 0 || took < 700*time.Millisecond || took >= time.Minute {
		t.Errorf("budget 700ms: %d attempts, waits %v, error %v after %s", n, waits, err, took)
	}
	noSecret(t, err)
}

// A budget of zero or less is "unset": the delivery gets DefaultBudget, not a context
// that has already ended.
func TestPosterWithoutBudgetDelivers(t *testing.T) {
	rec := newRecorder(t, func(int, http.ResponseWriter, *http.Request) {})
	for _, budget := range []time.Duration{0, -time.Second} {
		p := NewPoster("webhook", rec.URL, time.Second, 1, budget)
		if err := p.Post(context.Background(), []byte(`{}`), nil); err != nil {
			t.Errorf("budget %v: %v", budget, err)
		}
	}
	if n := rec.count(); n != 2 {
		t.Errorf("%d deliveries, want 2", n)
	}
}

func TestPosterConnectionRefused(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = NewPoster("webhook", "http://"+addr+secretPath, time.Second, 2, 5*time.Second).Post(context.Background(), []byte(`{}`), nil)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("error %v", err)
	}
	noSecret(t, err)
}

func TestPosterRedirects(t *testing.T) {
	// Another host: 127.0.0.1 redirects to localhost, a different server.
	other := newRecorder(t, func(int, http.ResponseWriter, *http.Request) {})
	otherURL := strings.Replace(other.URL, "127.0.0.1", "localhost", 1)
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusFound} {
		off := newRecorder(t, func(_ int, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, otherURL+secretPath, code)
		})
		err := NewPoster("webhook", off.URL+secretPath, time.Second, 3, 5*time.Second).Post(context.Background(), []byte(`{"x":1}`), nil)
		if err == nil || !strings.Contains(err.Error(), "redirect to another host refused") {
			t.Errorf("%d to another host: error %v", code, err)
		}
		if off.count() != 1 {
			t.Errorf("%d: %d attempts, want 1 (a refused redirect is final)", code, off.count())
		}
		noSecret(t, err)
	}
	if other.count() != 0 {
		t.Errorf("the other host received %d requests", other.count())
	}

	// Same host, 307/308: followed, body and method kept.
	for _, code := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		same := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", code)
			}
		})
		if err := NewPoster("webhook", same.URL+"/old", time.Second, 3, 5*time.Second).Post(context.Background(), []byte(`{"x":1}`), nil); err != nil {
			t.Fatalf("%d on the same host: %v", code, err)
		}
		same.mu.Lock()
		paths, bodies := same.paths, same.bodies
		same.mu.Unlock()
		if len(paths) != 2 || paths[1] != "/new" || bodies[1] != `POST {"x":1}` {
			t.Errorf("%d on the same host: %q %q", code, paths, bodies)
		}
	}

	// Same host, 301/302/303: the client would re-send a body-less GET and count
	// its 200 as delivered; refused instead.
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther} {
		same := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/old" {
				http.Redirect(w, r, "/new", code)
			}
		})
		err := NewPoster("webhook", same.URL+"/old", time.Second, 3, 5*time.Second).Post(context.Background(), []byte(`{"x":1}`), nil)
		if err == nil || !strings.Contains(err.Error(), "redirect") {
			t.Errorf("%d: a redirect that drops the body counted as delivered (requests %q)", code, same.requests())
		}
		if same.count() != 1 {
			t.Errorf("%d: %d requests, want 1", code, same.count())
		}
	}

	// A redirect loop on the same host ends.
	loop := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/again", http.StatusTemporaryRedirect)
	})
	err := NewPoster("webhook", loop.URL+secretPath, time.Second, 3, 5*time.Second).Post(context.Background(), []byte(`{}`), nil)
	if err == nil || !strings.Contains(err.Error(), "too many redirects") || loop.count() != 3 {
		t.Errorf("loop: %d requests, error %v", loop.count(), err)
	}
	noSecret(t, err)
}

func TestPosterErrorsNeverCarryTheURL(t *testing.T) {
	// Every failure mode, one after the other, with a secret-looking path.
	release := make(chan struct{})
	defer close(release)
	srv := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("X-Mode") {
		case "500":
			w.WriteHeader(500)
		case "429":
			w.Header().Set("Retry-After", "60")
			w.WriteHeader(429)
		case "hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "offhost":
			http.Redirect(w, r, "http://localhost:1"+secretPath, http.StatusTemporaryRedirect)
		case "loop":
			http.Redirect(w, r, secretPath+"/again", http.StatusTemporaryRedirect)
		}
	})
	for _, mode := range []string{"500", "429", "hang", "offhost", "loop"} {
		h := http.Header{}
		h.Set("X-Mode", mode)
		err := NewPoster("webhook", srv.URL+secretPath, 200*time.Millisecond, 2, time.Second).Post(context.Background(), []byte(`{}`), h)
		if err == nil {
			t.Errorf("%s: no error", mode)
		}
		t.Logf("%s: %v", mode, err)
		noSecret(t, err)
	}
	// An unparsable URL and a cancelled context.
	err := NewPoster("webhook", "http://127.0.0.1:1"+secretPath+"\x7f", time.Second, 1, time.Second).Post(context.Background(), nil, nil)
	if err == nil {
		t.Error("bad URL: no error")
	}
	noSecret(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = NewPoster("webhook", srv.URL+secretPath, time.Second, 1, time.Second).Post(ctx, nil, nil)
	if err == nil {
		t.Error("cancelled: no error")
	}
	noSecret(t, err)
}

// A failed run pings <url>/fail; a receiver that echoes the check's own URL (or its
// path, or its query) in an error page must not leak it either.
func TestHeartbeatFailErrorsNeverCarryTheURL(t *testing.T) {
	srv := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		check := strings.TrimSuffix(r.URL.Path, "/fail")
		http.Error(w, "no check "+check+" or "+r.URL.RawQuery, http.StatusNotFound)
	})
	// With a trailing slash the path pinged on failure does not hold the URL's path.
	for _, raw := range []string{srv.URL + secretPath, srv.URL + secretPath + "/", srv.URL + "/ping?key=XXXXSECRET"} {
		hb := &Heartbeat{Poster: NewPoster("heartbeat", raw, time.Second, 1, time.Second)}
		err := hb.Ping(context.Background(), true, "failed")
		if err == nil {
			t.Fatalf("%s: no error", raw)
		}
		t.Logf("%v", err)
		noSecret(t, err)
	}
}

// TestPosterRedactsShortQuery: the URL's query and path are its secret parts
// whatever their length; only a sink's added credentials skip short strings.
func TestPosterRedactsShortQuery(t *testing.T) {
	srv := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no hook "+r.URL.Path+"?"+r.URL.RawQuery, http.StatusNotFound)
	})
	for _, c := range []struct{ path, query string }{{"/hook", "k=1"}, {"/xy", "q"}, {"/hook", "tok"}} {
		err := NewPoster("webhook", srv.URL+c.path+"?"+c.query, time.Second, 1, time.Second).Post(context.Background(), []byte("{}"), nil)
		if err == nil || !strings.Contains(err.Error(), `<path>?<query>"`) {
			t.Errorf("%s?%s: %v", c.path, c.query, err)
		}
	}
}

// TestReachConnectsWithoutSending: Reach opens a connection to the receiver and
// sends no request; a closed port is an error that names the sink, not the URL.
func TestReachConnectsWithoutSending(t *testing.T) {
	rec := newRecorder(t, func(int, http.ResponseWriter, *http.Request) {})
	accepted := make(chan struct{}, 1)
	rec.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted <- struct{}{}
		}
	}
	p := NewPoster("webhook", rec.URL+secretPath, time.Second, 1, time.Second)
	if err := p.Reach(context.Background()); err != nil {
		t.Fatalf("reach a listening receiver: %v", err)
	}
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("the receiver saw no connection")
	}
	rec.mu.Lock()
	hits := len(rec.hits)
	rec.mu.Unlock()
	if hits != 0 {
		t.Errorf("Reach sent %d request(s)", hits)
	}

	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	err = NewPoster("slack", "http://"+closed+secretPath, time.Second, 1, time.Second).Reach(context.Background())
	if err == nil || !strings.HasPrefix(err.Error(), "slack: ") || strings.Contains(err.Error(), "XXXXSECRET") {
		t.Errorf("closed port: %v", err)
	}
}

// TestReachVerifiesTLS: for https, Reach completes the TLS handshake a delivery
// would, with the delivery's own TLS configuration and proxy, and sends nothing: a
// receiver whose certificate is not trusted fails it (a bare TCP connect would
// pass while every send fails the handshake).
func TestReachVerifiesTLS(t *testing.T) {
	var mu sync.Mutex
	hits := 0
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
	}))
	defer srv.Close()
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes

	untrusted := NewPoster("webhook", srv.URL+secretPath, time.Second, 1, time.Second)
	err := untrusted.Reach(context.Background())
	// doctor's hint reads "TLS handshake".
	if err == nil || !strings.HasPrefix(err.Error(), "webhook: TLS handshake: ") || !strings.Contains(err.Error(), "certificate") || strings.Contains(err.Error(), "XXXXSECRET") {
		t.Errorf("untrusted certificate: %v", err)
	}

	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	trusted := NewPoster("webhook", srv.URL+secretPath, time.Second, 1, time.Second)
	trusted.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if err := trusted.Reach(context.Background()); err != nil {
		t.Errorf("trusted certificate: %v", err)
	}

	// Through an HTTP proxy: a CONNECT tunnel, then the same handshake.
	var tunnels []string
	proxy := httptest.NewServer(connectProxy(func(host string) {
		mu.Lock()
		tunnels = append(tunnels, host)
		mu.Unlock()
	}))
	defer proxy.Close()
	proxyURL, _ := url.Parse(proxy.URL)
	for _, p := range []*Poster{untrusted, trusted} {
		p.transport.Proxy = http.ProxyURL(proxyURL)
	}
	if err := untrusted.Reach(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate through the proxy: %v", err)
	}
	if err := trusted.Reach(context.Background()); err != nil {
		t.Errorf("trusted certificate through the proxy: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := strings.TrimPrefix(srv.URL, "https://"); len(tunnels) != 2 || tunnels[0] != want {
		t.Errorf("tunnels %q, want two to %s", tunnels, want)
	}
	if hits != 0 {
		t.Errorf("Reach sent %d request(s)", hits)
	}
}

// connectProxy is a proxy that only tunnels (CONNECT), telling tunnelled each target.
func connectProxy(tunnelled func(host string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		tunnelled(r.Host)
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		// The 200 is written on the hijacked connection itself, and what the
		// server had already read is passed on: a proxy's tunnel, not the test's race.
		down, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			up.Close()
			return
		}
		_, _ = io.WriteString(down, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { _, _ = io.Copy(up, rw.Reader); up.Close() }()
		_, _ = io.Copy(down, up)
		down.Close()
	}
}

// TestReachAsksTheProxyAsPostDoes: Reach asks the proxy function about the URL a
// delivery posts to (scheme, host and port), so that NO_PROXY=host:port sends both
// the same way (direct), not Reach through the proxy while deliveries go direct.
func TestReachAsksTheProxyAsPostDoes(t *testing.T) {
	rec := newRecorder(t, func(int, http.ResponseWriter, *http.Request) {})
	p := NewPoster("webhook", rec.URL+secretPath, time.Second, 1, time.Second)
	var asked []string
	p.transport.Proxy = func(r *http.Request) (*url.URL, error) {
		asked = append(asked, r.URL.Scheme+"://"+r.URL.Host)
		return nil, nil
	}
	if err := p.Reach(context.Background()); err != nil {
		t.Fatalf("reach: %v", err)
	}
	if err := p.Post(context.Background(), []byte("{}"), nil); err != nil {
		t.Fatalf("post: %v", err)
	}
	if len(asked) != 2 || asked[0] != rec.URL || asked[1] != rec.URL {
		t.Errorf("the proxy function was asked about %q, want %s for Reach then Post", asked, rec.URL)
	}

	// As reported: HTTPS_PROXY set, NO_PROXY naming the receiver's host:port (not
	// loopback, which is never proxied; dialled on loopback here).
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	var mu sync.Mutex
	tunnels := 0
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		tunnels++
		mu.Unlock()
		http.Error(w, "no tunnel", http.StatusForbidden)
	}))
	defer proxy.Close()
	srvURL, _ := url.Parse(srv.URL)
	receiver := "am.example.com:" + srvURL.Port()
	env := (&httpproxy.Config{HTTPSProxy: proxy.URL, NoProxy: receiver}).ProxyFunc()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate()) // it names *.example.com
	p = NewPoster("alertmanager", "https://"+receiver+secretPath, time.Second, 1, time.Second)
	p.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	p.transport.Proxy = func(r *http.Request) (*url.URL, error) { return env(r.URL) }
	p.transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, strings.Replace(addr, receiver, srvURL.Host, 1))
	}
	if err := p.Reach(context.Background()); err != nil {
		t.Errorf("reach with NO_PROXY=%s: %v", receiver, err)
	}
	if err := p.Post(context.Background(), []byte("{}"), nil); err != nil {
		t.Errorf("post with NO_PROXY=%s: %v", receiver, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if tunnels != 0 {
		t.Errorf("%d CONNECT(s) to the proxy, want none: NO_PROXY names the receiver", tunnels)
	}
}

// TestReachNamesAnHTTPSProxysHandshake: through an https proxy the first TLS
// handshake is the proxy's own. An untrusted proxy certificate is the proxy's fault,
// not labelled "TLS handshake" (doctor's hint then blames the receiver's
// certificate); the receiver's failed handshake behind a trusted proxy still is.
func TestReachNamesAnHTTPSProxysHandshake(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	proxy := httptest.NewTLSServer(connectProxy(func(string) {}))
	defer proxy.Close()
	for _, s := range []*httptest.Server{srv, proxy} {
		s.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	}
	proxyURL, _ := url.Parse(proxy.URL)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate()) // the proxy's too: httptest has one certificate
	reach := func(target string, trust bool) error {
		p := NewPoster("webhook", target+secretPath, time.Second, 1, time.Second)
		p.transport.Proxy = http.ProxyURL(proxyURL)
		if trust {
			p.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		}
		return p.Reach(context.Background())
	}
	if err := reach(srv.URL, false); err == nil || strings.Contains(err.Error(), "TLS handshake") || !strings.Contains(err.Error(), "proxy") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted proxy: %v, want the proxy's certificate named, not \"TLS handshake\"", err)
	}
	// The certificate names 127.0.0.1, not localhost: the receiver's handshake fails.
	misnamed := strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)
	if err := reach(misnamed, true); err == nil || !strings.HasPrefix(err.Error(), "webhook: TLS handshake: ") || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("misnamed receiver behind a trusted proxy: %v", err)
	}
	if err := reach(srv.URL, true); err != nil {
		t.Errorf("trusted proxy and receiver: %v", err)
	}
}

// A URL's path and query are hidden in the form a receiver echoes them, escaped as
// sent (the request line) or decoded (a framework's parsed path and parameters):
// signed URLs carry %2F and %3D in their secret parts.
func TestPosterRedactsEscapedAndDecodedForms(t *testing.T) {
	srv := newRecorder(t, func(n int, w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no hook "+r.RequestURI+" | "+r.URL.Path+" | "+r.URL.Query().Get("sig"), http.StatusNotFound)
	})
	err := NewPoster("webhook", srv.URL+"/services/T000/XXXXSECRET%2Fa?sp=%2Ftriggers&sig=XXXXSECRET%3D", time.Second, 1, time.Second).
		Post(context.Background(), []byte("{}"), nil)
	if err == nil {
		t.Fatal("no error")
	}
	t.Logf("%v", err)
	noSecret(t, err)
}
