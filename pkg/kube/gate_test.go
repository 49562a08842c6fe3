package kube

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
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
// request that hangs.
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

// A first request that fails opens the gate: the others are not held forever.
func TestGateOpensAfterAFailedFirstRequest(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: every request fails fast
	c, err := New(&rest.Config{Host: "https://" + addr, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := c.ListPods(context.Background(), "ns", metav1.ListOptions{}); err == nil {
			t.Fatalf("request %d to a closed port succeeded", i)
		}
	}
}
