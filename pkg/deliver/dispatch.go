// Package deliver sends what pkg/alert plans: the sinks (Slack, a signed generic
// webhook, Alertmanager) over one bounded HTTP poster, and the dispatcher that
// keeps what failed in the state's outbox (pkg/outbox) and retries it.
package deliver

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/outbox"
	"github.com/agentenv/watchdog/pkg/state"
)

// Dispatcher delivers notifications to every sink, keeps what failed in the state's
// outbox for the next run, and retries the outbox first.
type Dispatcher struct {
	Sinks []alert.Sink
	Mode  state.Mode // a dry run sends nothing: its deliveries say where each would go
	// Events, when set, records every notification as a Kubernetes Event.
	Events func(ctx context.Context, n alert.Notification) error
	// OnFailure is told about each failed delivery (it leaves a Warning Event).
	OnFailure func(ctx context.Context, n alert.Notification, sink string, err error)
	// SendBy, when set, ends deliveries and their Events (retries included), leaving
	// the caller time to persist what failed. OnFailure is not bounded by it.
	SendBy time.Time
	Outbox outbox.Config // seals what is kept, rebuilds what is retried
	// ReservedFor is how long an entry Reserve made belongs to the run that made it
	// (which sends it itself): another run retries it only after that.
	ReservedFor time.Duration
}

// KubernetesEvent names a notification's Kubernetes Event as if it were a sink.
const KubernetesEvent = "kubernetes-event"

// Delivery is the outcome of one notification to one sink.
type Delivery struct {
	ID     string `json:"id"`
	Event  string `json:"event"`
	Sink   string `json:"sink"`
	OK     bool   `json:"ok"`
	Retry  bool   `json:"retry,omitempty"` // from the outbox
	Kept   bool   `json:"kept,omitempty"`  // the failed alert is in the outbox, retried next run
	Error  string `json:"error,omitempty"`
	DryRun bool   `json:"dryRun,omitempty"`
	// Dropped: an outbox entry that is not retried; Error says why. A warning.
	Dropped bool `json:"dropped,omitempty"`
	// Unauthenticated: retried from the outbox without --outbox-key. A warning.
	Unauthenticated bool `json:"unauthenticated,omitempty"`
}

// Deliver sends the outbox, the notes, then the open alerts of s again to each
// Refresher (a failed refresh is reported, not kept: the next run refreshes again).
func (d *Dispatcher) Deliver(ctx context.Context, s *state.State, notes []alert.Notification, now time.Time) []Delivery {
	var out []Delivery
	if d.Mode == state.ModeDryRun {
		names := alert.SinkNames(d.Sinks)
		if d.Events != nil {
			names = append(names, KubernetesEvent)
		}
		for _, n := range notes {
			for _, name := range names {
				out = append(out, Delivery{ID: n.ID, Event: n.Event, Sink: name, DryRun: true})
			}
		}
		return out
	}
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if !d.SendBy.IsZero() {
		sctx, cancel = context.WithDeadline(ctx, d.SendBy)
	}
	defer cancel()
	// The retries get at most half of what is left of the send window: each may
	// wait out its whole budget on a receiver that never answers, and must not
	// leave this run's own pages no time. What is not retried stays for next run.
	rctx := sctx
	if deadline, ok := sctx.Deadline(); ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(sctx, time.Now().Add(time.Until(deadline)/2))
		defer cancel()
	}
	out = append(out, d.retryOutbox(ctx, rctx, s, now)...)
	for _, n := range notes {
		if d.Events != nil {
			del := Delivery{ID: n.ID, Event: n.Event, Sink: KubernetesEvent, OK: true}
			if err := d.Events(sctx, n); err != nil {
				del.OK, del.Error = false, err.Error()
			}
			out = append(out, del)
		}
		var failed []string
		var lastErr string
		for _, sink := range d.Sinks {
			del := d.send(ctx, sctx, sink, n, Delivery{ID: n.ID, Event: n.Event, Sink: sink.Name()})
			if !del.OK {
				failed, lastErr = append(failed, sink.Name()), del.Error
			}
			out = append(out, del)
		}
		if len(failed) > 0 {
			p, err := d.Outbox.Pending(n, now, failed, lastErr)
			if err != nil {
				continue // plain data: cannot happen
			}
			s.Outbox = append(s.Outbox, p)
		}
	}
	for _, sink := range d.Sinks {
		r, ok := sink.(Refresher)
		if !ok {
			continue
		}
		n, err := r.Refresh(sctx, s.Alerts, now)
		if n == 0 && err == nil {
			continue
		}
		del := Delivery{Event: EventRefresh, Sink: sink.Name(), OK: err == nil}
		if err != nil {
			del.Error = err.Error()
		}
		out = append(out, del)
	}
	return out
}

// Reserve puts notes into s's outbox as not yet delivered, for the state written
// by the alert claim before the sends: a run ending before them leaves the pages to
// the next run. The run's own Deliver sends notes itself.
func (d *Dispatcher) Reserve(s *state.State, notes []alert.Notification, now time.Time) {
	sinks := alert.SinkNames(d.Sinks)
	if len(sinks) == 0 {
		return
	}
	for _, n := range notes {
		p, err := d.Outbox.Pending(n, now, sinks, "not sent yet: the run that claimed it ended before sending")
		if err != nil {
			continue // plain data: cannot happen
		}
		p.Attempts = 0
		s.Outbox = append(s.Outbox, p)
	}
}

// maxDeliveredID is the longest id remembered as delivered (the watchdog's have 16).
const maxDeliveredID = 64

// Why a copy of an entry is not sent: the outbox is read from a document an
// editor may have written, and a genuine sealed entry can be copied or put back.
var (
	errRetriedThisRun   = errors.New("a copy of an entry already retried in this run: each entry is retried at most once per run")
	errAlreadyDelivered = errors.New("already delivered: an entry put back after its delivery is not sent again")
	errRetriesOutOfTime = errors.New("not retried in this run: the retries' share of the send window was spent (this run's own alerts keep the rest); kept for the next run")
)

func (d *Dispatcher) retryOutbox(ctx, sctx context.Context, s *state.State, now time.Time) []Delivery {
	var out []Delivery
	// Forget what can no longer be replayed: an older entry is dropped for its age.
	s.Delivered = slices.DeleteFunc(s.Delivered, func(e state.DeliveredEntry) bool { return now.Sub(e.CreatedAt) > outbox.MaxPendingAge })
	retried := map[string]bool{}
	kept := s.Outbox[:0]
	for _, p := range s.Outbox {
		if age := now.Sub(p.CreatedAt); p.Attempts == 0 && age < d.ReservedFor && age >= -decide.ClockSkewTolerance {
			// Another run's, being sent by it now. Dated further ahead, by a run
			// whose clock ran ahead, it would be held for as long: retried instead.
			kept = append(kept, p)
			continue
		}
		n, authenticated, err := d.Outbox.Open(p, now)
		switch {
		case err != nil:
		case retried[p.ID]:
			err = errRetriedThisRun
		case slices.ContainsFunc(s.Delivered, func(e state.DeliveredEntry) bool { return e.ID == p.ID }):
			err = errAlreadyDelivered
		}
		if err != nil {
			// Names only what the watchdog would write: the entry is someone else's.
			out = append(out, Delivery{ID: state.Truncate(p.ID, 32), Event: state.Truncate(p.Event, 32), Sink: "outbox", Dropped: true, Error: err.Error()})
			continue
		}
		var still []string
		attempted := false
		// Sinks are not sealed: each configured sink the entry names gets it once (an
		// edit listing one twice must not multiply sends); one no longer configured, none.
		for _, sink := range d.Sinks {
			if !slices.Contains(p.Sinks, sink.Name()) {
				continue
			}
			del := Delivery{ID: p.ID, Event: p.Event, Sink: sink.Name(), Retry: true}
			if sctx.Err() != nil {
				// The retries' share of the window is spent: kept, not an attempt.
				del.Kept, del.Error = true, errRetriesOutOfTime.Error()
			} else {
				attempted = true
				del.Unauthenticated = !authenticated
				if del = d.send(ctx, sctx, sink, n, del); !del.OK {
					p.LastError = del.Error
				}
			}
			if !del.OK {
				still = append(still, sink.Name())
			}
			out = append(out, del)
		}
		retried[p.ID] = true
		if attempted {
			p.Attempts++
		}
		if len(still) > 0 {
			p.Sinks = still
			kept = append(kept, p)
		} else if len(p.ID) <= maxDeliveredID {
			s.Delivered = append(s.Delivered, state.DeliveredEntry{ID: p.ID, CreatedAt: p.CreatedAt})
		}
	}
	s.Outbox = kept
	return out
}

// send delivers n to sink within sctx; a failure is kept and told to OnFailure.
func (d *Dispatcher) send(ctx, sctx context.Context, sink alert.Sink, n alert.Notification, del Delivery) Delivery {
	del.OK = true
	if err := sink.Send(sctx, n); err != nil {
		del.OK, del.Error, del.Kept = false, err.Error(), true
		if d.OnFailure != nil {
			d.OnFailure(ctx, n, sink.Name(), err)
		}
	}
	return del
}

// Refresher is a sink whose receiver forgets an alert that is not sent again
// (Alertmanager at its endsAt). Refresh returns how many it sent again.
type Refresher interface {
	Refresh(ctx context.Context, open map[string]*state.Alert, now time.Time) (int, error)
}

// EventRefresh names refresh deliveries in reports and logs; it is no alert event.
const EventRefresh = "refresh"
