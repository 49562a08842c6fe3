package slicewatch

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// fakeClient fails its first failures calls, then lists version "1" and hands
// out fake watches.
type fakeClient struct {
	mu       sync.Mutex
	failures int
	watches  chan *watch.FakeWatcher
	limits   []int64 // each list's Limit
}

func (f *fakeClient) fail() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return errors.New(`endpointslices.discovery.k8s.io is forbidden: User "system:serviceaccount:x:y" cannot list resource "endpointslices"`)
	}
	return nil
}

func (f *fakeClient) ListEndpointSlices(_ context.Context, _ string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	f.mu.Lock()
	f.limits = append(f.limits, opts.Limit)
	f.mu.Unlock()
	if err := f.fail(); err != nil {
		return nil, err
	}
	return &discoveryv1.EndpointSliceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
}

func (f *fakeClient) WatchEndpointSlices(context.Context, string, metav1.ListOptions) (watch.Interface, error) {
	w := watch.NewFake()
	f.watches <- w
	return w, nil
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// A watch that cannot start warns once (passes keep the plain interval), is
// retried, says when it is back, and then signals each change; a burst of
// changes while nobody reads is one signal.
func TestWatchSignalsChangesAndWarnsWhileItCannotWatch(t *testing.T) {
	c := &fakeClient{failures: 2, watches: make(chan *watch.FakeWatcher, 4)}
	var logs syncBuf
	w := New(c, "agentenv-system", "agentenv-nodes", time.Second, clock.RealClock{}, zerolog.New(&logs))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	var fw *watch.FakeWatcher
	select {
	case fw = <-c.watches:
	case <-time.After(20 * time.Second):
		t.Fatal("no watch after two failed lists")
	}
	// The fake hands the watch over before Run logs the recovery: wait for it.
	recovered := "watching the nodes' EndpointSlices: a change"
	for end := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), recovered) && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	out := logs.String()
	if n := strings.Count(out, "passes run on the plain --interval"); n != 1 {
		t.Errorf("%d warnings for one outage, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "forbidden") || !strings.Contains(out, recovered) {
		t.Errorf("the warning does not say why, or the recovery is not logged:\n%s", out)
	}
	select {
	case <-w.Changes():
		t.Fatal("a signal before any change")
	default:
	}
	defer fw.Stop()
	c.mu.Lock()
	// The list only reads the version the watch starts from: one slice, not thousands.
	if len(c.limits) != 3 || slices.ContainsFunc(c.limits, func(l int64) bool { return l != 1 }) {
		t.Errorf("lists with Limit %v, want 3 lists with Limit 1", c.limits)
	}
	c.mu.Unlock()
	for i := 0; i < 3; i++ {
		fw.Modify(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-nodes-abc", ResourceVersion: "2"}})
	}
	// Received once the third change was handled: the burst is over.
	fw.Action(watch.Bookmark, &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "3"}})
	select {
	case <-w.Changes():
	case <-time.After(10 * time.Second):
		t.Fatal("no signal after a change")
	}
	select {
	case <-w.Changes():
		t.Fatal("a burst of changes read as two signals")
	case <-time.After(100 * time.Millisecond):
	}
}

// Run ends with its context, also in the middle of a watch.
func TestWatchEndsWithItsContext(t *testing.T) {
	c := &fakeClient{watches: make(chan *watch.FakeWatcher, 4)}
	w := New(c, "ns", "svc", time.Second, clock.RealClock{}, zerolog.Nop())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	fw := <-c.watches
	cancel()
	fw.Stop() // what the REST client does when the request's context ends
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not end with its context")
	}
}
