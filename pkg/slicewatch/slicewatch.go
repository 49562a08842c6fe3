// Package slicewatch signals each change of the nodes' EndpointSlices to `watchdog
// run`, so the next pass looks while newly rolled nodes' rejected heartbeats rise,
// not an interval later. No cache: a failed watch only costs that head start.
package slicewatch

import (
	"context"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
)

// Client is the part of kube.Client the watch uses.
type Client interface {
	ListEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	WatchEndpointSlices(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error)
}

const (
	// watchFor is how long the API server keeps one watch open (then resumed from the
	// last version seen); the client cuts it watchGrace later.
	watchFor   = 5 * time.Minute
	watchGrace = 30 * time.Second
	// retryFirst doubles up to retryMax between attempts after a failure.
	retryFirst = time.Second
	retryMax   = 2 * time.Minute
)

// Watcher signals on Changes each change of Service's EndpointSlices in Namespace.
type Watcher struct {
	Client             Client
	Namespace, Service string
	Timeout            time.Duration // bounds each list
	Clock              clock.Clock
	Log                zerolog.Logger
	changes            chan struct{}
	// Run's: a watch is open (since opened), a failure was warned of.
	watching, failing bool
	opened            time.Time
}

// New returns a watcher; Run starts it.
func New(c Client, namespace, service string, timeout time.Duration, clk clock.Clock, log zerolog.Logger) *Watcher {
	return &Watcher{Client: c, Namespace: namespace, Service: service, Timeout: timeout, Clock: clk,
		Log: log.With().Str("watch", "endpointslices").Str("service", service).Logger(), changes: make(chan struct{}, 1)}
}

// Changes delivers one signal for any number of changes since it was last read.
func (w *Watcher) Changes() <-chan struct{} { return w.changes }

// Run watches until ctx ends, warning once per outage and retrying with back-off.
func (w *Watcher) Run(ctx context.Context) {
	var rv string
	delay := retryFirst
	for ctx.Err() == nil {
		var err error
		if rv == "" {
			rv, err = w.list(ctx)
		}
		if err == nil {
			rv, err = w.watch(ctx, rv)
		}
		if err == nil || ctx.Err() != nil {
			continue
		}
		if w.watching && w.Clock.Since(w.opened) >= retryMax {
			delay = retryFirst // it worked for a while: a new outage
		}
		w.watching = false
		if !w.failing {
			w.Log.Warn().Err(err).Msg("cannot watch the nodes' EndpointSlices: passes run on the plain --interval until the watch is back")
			w.failing = true
		}
		select {
		case <-ctx.Done():
		case <-w.Clock.After(delay):
		}
		delay = min(2*delay, retryMax)
	}
}

func (w *Watcher) selector() string { return discoveryv1.LabelServiceName + "=" + w.Service }

// list reads the version the watch starts from (one slice is enough).
func (w *Watcher) list(ctx context.Context) (string, error) {
	lctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	l, err := w.Client.ListEndpointSlices(lctx, w.Namespace, metav1.ListOptions{LabelSelector: w.selector(), Limit: 1})
	if err != nil {
		return "", fmt.Errorf("list EndpointSlices of %s in %s: %w", w.Service, w.Namespace, err)
	}
	return l.ResourceVersion, nil
}

// watch signals each change from version rv until the watch ends, returning where to resume ("": list).
func (w *Watcher) watch(ctx context.Context, rv string) (string, error) {
	secs := int64(watchFor / time.Second)
	wctx, cancel := context.WithTimeout(ctx, watchFor+watchGrace)
	defer cancel()
	wi, err := w.Client.WatchEndpointSlices(wctx, w.Namespace, metav1.ListOptions{LabelSelector: w.selector(), ResourceVersion: rv, TimeoutSeconds: &secs, AllowWatchBookmarks: true})
	if err != nil {
		if expired(err) {
			return "", nil
		}
		return "", fmt.Errorf("watch EndpointSlices of %s in %s: %w", w.Service, w.Namespace, err)
	}
	defer wi.Stop()
	if !w.watching {
		w.Log.Info().Msg("watching the nodes' EndpointSlices: a change starts an early pass")
		w.watching, w.failing, w.opened = true, false, w.Clock.Now()
	}
	began, events := w.Clock.Now(), 0
	for ev := range wi.ResultChan() {
		events++
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			select {
			case w.changes <- struct{}{}:
			default: // a signal is already waiting: one pass covers both
			}
		case watch.Bookmark:
		case watch.Error:
			if err := apierrors.FromObject(ev.Object); !expired(err) {
				return "", fmt.Errorf("watch EndpointSlices of %s in %s: %w", w.Service, w.Namespace, err)
			}
			return "", nil // list again: changes in between are the next pass's anyway
		}
		if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && s.ResourceVersion != "" {
			rv = s.ResourceVersion
		}
	}
	if wctx.Err() != nil && ctx.Err() == nil {
		return "", fmt.Errorf("watch EndpointSlices of %s in %s: no end from the API server within %s", w.Service, w.Namespace, watchFor+watchGrace)
	}
	if events == 0 && w.Clock.Since(began) < retryFirst {
		// Not a timeout: something between here and the API server ends watches.
		return "", fmt.Errorf("watch EndpointSlices of %s in %s: closed at once", w.Service, w.Namespace)
	}
	return rv, nil
}

// expired: the version to resume from is gone; list again.
func expired(err error) bool { return apierrors.IsGone(err) || apierrors.IsResourceExpired(err) }
