package leader

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentenv/watchdog/pkg/kube"
)

// leaseServer is a minimal API server for one Lease whose updates succeed, then
// fail fast, then hang: an API server that flaps, then stops answering.
type leaseServer struct {
	mu        sync.Mutex
	lease     *coordinationv1.Lease
	rv        int
	puts      int
	okPuts    int // updates that succeed
	failPuts  int // then updates that fail at once
	lastOKPut time.Time
	stopHangs chan struct{}
}

func (s *leaseServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	switch r.Method {
	case http.MethodGet:
		if s.lease == nil {
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
			return
		}
		b, _ := json.Marshal(s.lease)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	case http.MethodPost, http.MethodPut:
		s.puts++
		n := s.puts
		switch {
		case n <= s.okPuts:
			var l coordinationv1.Lease
			_ = json.NewDecoder(r.Body).Decode(&l)
			s.rv++
			l.ResourceVersion = strconv.Itoa(s.rv)
			l.APIVersion, l.Kind = "coordination.k8s.io/v1", "Lease"
			s.lease = &l
			s.lastOKPut = time.Now()
			b, _ := json.Marshal(&l)
			s.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			if r.Method == http.MethodPost {
				w.WriteHeader(http.StatusCreated)
			}
			_, _ = w.Write(b)
		case n <= s.okPuts+s.failPuts:
			s.mu.Unlock()
			http.Error(w, "flapping", http.StatusInternalServerError)
		default:
			s.mu.Unlock()
			select {
			case <-r.Context().Done():
			case <-s.stopHangs:
			}
		}
	default:
		s.mu.Unlock()
		http.Error(w, "unexpected", http.StatusMethodNotAllowed)
	}
}

// A leader must stop leading before any other replica can take the Lease over
// (LeaseDuration after its last renewal), even when a renewal attempt hangs after a
// few that failed fast: client-go bounds the whole renewal by RenewDeadline.
func TestLeaderStopsLeadingWithinRenewDeadline(t *testing.T) {
	srv := &leaseServer{okPuts: 1, failPuts: 4, stopHangs: make(chan struct{})}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer close(srv.stopHangs)
	client, err := kube.New(&rest.Config{Host: hs.URL, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	e := &Elector{
		Namespace: "ns", Name: "l", Identity: "me",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 400 * time.Millisecond,
		Client: client, Clock: clock.RealClock{}, Log: zerolog.Nop(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := make(chan time.Time, 1)
	go func() {
		_ = e.Run(ctx, func(lctx context.Context) {
			<-lctx.Done()
			stopped <- time.Now()
			cancel() // one term is enough
		})
	}()
	select {
	case at := <-stopped:
		srv.mu.Lock()
		renewed := srv.lastOKPut
		srv.mu.Unlock()
		if held := at.Sub(renewed); held >= e.LeaseDuration {
			t.Fatalf("still leading %s after the last renewal: another replica may take the Lease after %s", held.Round(time.Millisecond), e.LeaseDuration)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("never stopped leading")
	}
}

// Hold: a pass takes a free Lease, runs, and releases it; a second pass that
// finds it held by another (not expired) waits its bound and does not run; a
// Lease the API refuses to read is an error, at once.
func TestHoldOnePassAtATime(t *testing.T) {
	srv := &leaseServer{okPuts: 100, stopHangs: make(chan struct{})}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer close(srv.stopHangs)
	client, err := kube.New(&rest.Config{Host: hs.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	elector := func(id string) *Elector {
		return &Elector{Namespace: "ns", Name: "l", Identity: id, LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second,
			RetryPeriod: 100 * time.Millisecond, Client: client, Clock: clock.RealClock{}, Log: zerolog.Nop()}
	}
	ctx := context.Background()
	var second bool
	held, err := elector("a").Hold(ctx, time.Second, func(context.Context) {
		// Meanwhile another pass waits its bound and gives up.
		ok, err := elector("b").Hold(ctx, 300*time.Millisecond, func(context.Context) { second = true })
		if ok || err != nil || second {
			t.Errorf("a second pass while the first holds the Lease: held %v, err %v, ran %v", ok, err, second)
		}
	})
	if !held || err != nil {
		t.Fatalf("a free Lease: held %v, err %v", held, err)
	}
	srv.mu.Lock()
	holder := *srv.lease.Spec.HolderIdentity
	srv.mu.Unlock()
	if holder != "" {
		t.Errorf("the Lease after the pass: held by %q, want released", holder)
	}
	if held, err := elector("b").Hold(ctx, time.Second, func(context.Context) { second = true }); !held || err != nil || !second {
		t.Errorf("the next pass after the release: held %v, err %v, ran %v", held, err, second)
	}
	refused := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`))
	}))
	defer refused.Close()
	rc, _ := kube.New(&rest.Config{Host: refused.URL})
	e := elector("c")
	e.Client = rc
	start := time.Now()
	if held, err := e.Hold(ctx, 5*time.Second, func(context.Context) {}); held || err == nil || time.Since(start) > 2*time.Second {
		t.Errorf("a refused Lease: held %v, err %v after %s, want an error at once", held, err, time.Since(start))
	}
}

// A Lease whose leaseDurationSeconds is longer than the configured duration (a
// namespace editor's, or a stale holder's: a year) is not trusted: a follower takes
// it over once the configured duration passed without a renewal.
func TestLongerLeaseDurationIsNotTrusted(t *testing.T) {
	year := int32(365 * 24 * 3600)
	srv := &leaseServer{okPuts: 10, stopHangs: make(chan struct{}), lease: &coordinationv1.Lease{
		Spec: coordinationv1.LeaseSpec{HolderIdentity: new("squatter"), LeaseDurationSeconds: &year}}}
	srv.lease.Name, srv.lease.Namespace, srv.lease.ResourceVersion = "wd", "ns", "1"
	hs := httptest.NewServer(srv)
	defer hs.Close()
	defer close(srv.stopHangs)
	c, err := kube.New(&rest.Config{Host: hs.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	e := &Elector{Namespace: "ns", Name: "wd", Identity: "me", LeaseDuration: 15 * time.Second, Client: c, Clock: clk, Log: zerolog.Nop()}
	if ok, err := e.attempt(context.Background()); ok || err != nil {
		t.Fatalf("took a Lease just renewed: %v, %v", ok, err)
	}
	clk.Step(16 * time.Second)
	if ok, err := e.attempt(context.Background()); !ok || err != nil {
		t.Fatalf("%v: a Lease unrenewed for longer than the configured 15s was not taken over: its own year of leaseDurationSeconds was trusted", err)
	}
}
