package kube

import (
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

// apiServer is an HTTP/2 TLS server on loopback answering every request with an
// empty list, counting the TCP connections it accepts.
func apiServer(t *testing.T, delay time.Duration) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}`))
	}))
	srv.Listener.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = l
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &conns
}

func clientFor(t *testing.T, srv *httptest.Server) *Client {
	t.Helper()
	c, err := New(&rest.Config{Host: srv.URL, Timeout: 10 * time.Second,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Concurrent first requests share one connection instead of dialling one each.
func TestConcurrentFirstRequestsShareOneConnection(t *testing.T) {
	srv, conns := apiServer(t, 20*time.Millisecond)
	c := clientFor(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.ListPods(context.Background(), "ns", metav1.ListOptions{})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("list: %v", err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("the API server accepted %d connections for 4 concurrent first requests, want 1", n)
	}
}

// A waiting request gives up with its own context instead of waiting on a first
// request that hangs. (Without a gate it would pass too: it guards against a gate
// that ignores the waiter's context.)
func TestGateWaiterHonoursItsContext(t *testing.T) {
	srv, _ := apiServer(t, 2*time.Second)
	c := clientFor(t, srv)
	go func() { _, _ = c.ListPods(context.Background(), "ns", metav1.ListOptions{}) }()
	time.Sleep(50 * time.Millisecond) // let the first request claim the gate
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.ListPods(ctx, "ns", metav1.ListOptions{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the waiter's deadline", err)
	}
	if waited := time.Since(start); waited > time.Second {
		t.Fatalf("the waiter waited %s for the hanging first request", waited)
	}
}

// roundTripFunc is a RoundTripper from a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The gate holds a second request while the first is in flight, and lets it go
// once the first has failed. (Through client-go this is hard to observe: its
// request-level retries would hide a gate that never opens behind a timeout.)
func TestGateHoldsThenOpensAfterAFailedFirstRequest(t *testing.T) {
	release := make(chan struct{})
	calls := make(chan string, 2)
	g := newFirstRequestGate(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		calls <- r.URL.Path
		if r.URL.Path == "/first" {
			<-release
			return nil, errors.New("connection reset by peer")
		}
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}, nil
	}))
	req := func(path string) *http.Request {
		r, err := http.NewRequest(http.MethodGet, "https://127.0.0.1"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	firstErr := make(chan error, 1)
	go func() {
		resp, err := g.RoundTrip(req("/first"))
		if err == nil {
			resp.Body.Close()
		}
		firstErr <- err
	}()
	if got := <-calls; got != "/first" {
		t.Fatalf("first call %q", got)
	}
	secondErr := make(chan error, 1)
	go func() {
		resp, err := g.RoundTrip(req("/second"))
		if err == nil {
			resp.Body.Close()
		}
		secondErr <- err
	}()
	select {
	case got := <-calls:
		t.Fatalf("%s went through while the first request was in flight", got)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := <-firstErr; err == nil {
		t.Fatal("the first request's error was lost")
	}
	select {
	case got := <-calls:
		if got != "/second" {
			t.Fatalf("second call %q", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second request is still held after the first one failed")
	}
	if err := <-secondErr; err != nil {
		t.Fatalf("second request: %v", err)
	}
}

// An API server's answer (or a pod's through its proxy) with headers past
// httpbound.MaxHeaderBytes fails: client-go's base transport gets the bound too.
func TestAnswerHeadersAreBounded(t *testing.T) {
	var proto atomic.Value
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto.Store(r.Proto)
		w.Header().Set("X-Big", strings.Repeat("h", 2*httpbound.MaxHeaderBytes))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"x"}}`))
	}))
	srv.EnableHTTP2 = true // as the API server speaks
	srv.StartTLS()
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	c, err := New(&rest.Config{Host: srv.URL, QPS: -1, TLSClientConfig: rest.TLSClientConfig{CAData: ca}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetConfigMap(context.Background(), "ns", "x"); err == nil {
		t.Fatalf("an answer with 128 KiB of headers was read (over %v)", proto.Load())
	}
	if p := proto.Load(); p != "HTTP/2.0" {
		t.Errorf("the request came over %v, want HTTP/2.0", p)
	}
}
