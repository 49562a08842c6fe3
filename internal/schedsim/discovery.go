package schedsim

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// Discovery is the stand-in scheduler's node discovery, a real one: it lists and
// watches the nodes Service's EndpointSlices on the API server and derives the
// nodes as the scheduler does (design.md §1, "What discovery counts as a node"),
// with the measured behaviours of §7: a change shows at once while the watch
// lives; after the API server went away, only RelistDelay after it answers again
// (the informer's relist back-off, 17-85 s measured); once Killed, never.
type Discovery struct {
	Client      kubernetes.Interface
	Namespace   string
	Service     string
	Port        int32
	RelistDelay time.Duration
	// Relists counts the lists after a broken watch.
	Relists atomic.Int64

	mu     sync.Mutex
	slices map[string]*discoveryv1.EndpointSlice
	synced bool
	cancel context.CancelFunc
	done   chan struct{}
}

// SimNode is a node as discovery derives it.
type SimNode struct {
	ID, Endpoint string
	Lingering    bool
}

// Start runs the discovery until ctx ends or Kill.
func (d *Discovery) Start(ctx context.Context) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ctx, d.cancel = context.WithCancel(ctx)
	d.done = make(chan struct{})
	go func() {
		defer close(d.done)
		d.run(ctx)
	}()
}

// Kill stops the discovery for good (its watch broken, never re-established): the
// nodes stay as they were.
func (d *Discovery) Kill() {
	d.mu.Lock()
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (d *Discovery) run(ctx context.Context) {
	sel := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + d.Service}
	rv, broken := "", false
	for ctx.Err() == nil {
		if rv == "" {
			if broken { // the informer's back-off: first the API server answers again, then the delay
				for ctx.Err() == nil {
					if _, err := d.Client.DiscoveryV1().EndpointSlices(d.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
						break
					}
					sleep(ctx, time.Second)
				}
				sleep(ctx, d.RelistDelay)
				d.Relists.Add(1)
			}
			list, err := d.Client.DiscoveryV1().EndpointSlices(d.Namespace).List(ctx, sel)
			if err != nil {
				broken = true
				sleep(ctx, time.Second)
				continue
			}
			d.mu.Lock()
			d.slices, d.synced = map[string]*discoveryv1.EndpointSlice{}, true
			for i := range list.Items {
				d.slices[list.Items[i].Name] = &list.Items[i]
			}
			d.mu.Unlock()
			rv, broken = list.ResourceVersion, false
		}
		opts := sel
		opts.ResourceVersion, opts.AllowWatchBookmarks = rv, true
		w, err := d.Client.DiscoveryV1().EndpointSlices(d.Namespace).Watch(ctx, opts)
		if err != nil {
			rv, broken = "", true
			continue
		}
		rv = d.follow(w, rv)
	}
}

// follow applies a watch's events from rv until it ends, and returns where to watch
// on from ("" after an error event: relist).
func (d *Discovery) follow(w watch.Interface, rv string) string {
	defer w.Stop()
	for ev := range w.ResultChan() {
		s, ok := ev.Object.(*discoveryv1.EndpointSlice)
		if !ok { // an error event: the watch is over
			return ""
		}
		rv = s.ResourceVersion
		d.mu.Lock()
		switch ev.Type {
		case watch.Added, watch.Modified:
			d.slices[s.Name] = s
		case watch.Deleted:
			delete(d.slices, s.Name)
		}
		d.mu.Unlock()
	}
	return rv
}

// Nodes is discovery's snapshot, sorted by id; without lingering, what Schedule
// chooses from. Empty until the first list.
func (d *Discovery) Nodes(lingering bool) []SimNode {
	d.mu.Lock()
	defer d.mu.Unlock()
	byID := map[string]SimNode{}
	for _, s := range d.slices {
		if !slices.ContainsFunc(s.Ports, func(p discoveryv1.EndpointPort) bool { return p.Port != nil && *p.Port == d.Port }) {
			continue
		}
		for _, ep := range s.Endpoints {
			if ep.Conditions.Serving == nil || !*ep.Conditions.Serving || ep.TargetRef == nil || ep.TargetRef.Name == "" {
				continue
			}
			i := slices.IndexFunc(ep.Addresses, func(a string) bool { return net.ParseIP(a) != nil })
			if i < 0 {
				continue
			}
			n := SimNode{ID: ep.TargetRef.Name, Endpoint: "http://" + net.JoinHostPort(ep.Addresses[i], strconv.Itoa(int(d.Port))),
				Lingering: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating}
			if old, ok := byID[n.ID]; !ok || !old.Lingering { // lingering wins on a clash, as the registry's
				byID[n.ID] = n
			}
		}
	}
	var out []SimNode
	for _, n := range byID {
		if lingering || !n.Lingering {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b SimNode) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Synced reports whether the first list is in.
func (d *Discovery) Synced() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.synced
}

func (d *Discovery) String() string {
	return fmt.Sprintf("discovery of %s/%s port %d", d.Namespace, d.Service, d.Port)
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
