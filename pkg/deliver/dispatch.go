// Package deliver sends what pkg/alert plans: the sinks over one bounded HTTP
// poster, and the dispatcher that keeps what failed in the state's outbox.
package deliver

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// MaxPendingAge is how long an undelivered alert is retried: a day-old page helps nobody.
const MaxPendingAge = 24 * time.Hour

// Dispatcher delivers notifications to every sink, keeping what failed for the next run.
type Dispatcher struct {
	Sinks  []alert.Sink
	Mode   state.Mode                                            // a dry run only says where each would go
	Events func(ctx context.Context, n alert.Notification) error // optional: a Kubernetes Event per notification
	// OnFailure is told about each failed delivery, unbounded by SendBy, which ends
	// the deliveries (retries and Events too) in time to persist what failed.
	OnFailure func(ctx context.Context, n alert.Notification, sink string, err error)
	SendBy    time.Time
	Source    alert.Source // put back on a retried alert, with the event table's words
}

// KubernetesEvent names a notification's Kubernetes Event as if it were a sink.
const KubernetesEvent = "kubernetes-event"

// Delivery is the outcome of one notification to one sink.
type Delivery struct {
	ID      string `json:"id"`
	Event   string `json:"event"`
	Sink    string `json:"sink"`
	OK      bool   `json:"ok"`
	Retry   bool   `json:"retry,omitempty"` // from the outbox
	Kept    bool   `json:"kept,omitempty"`  // the failed alert is in the outbox, retried next run
	Error   string `json:"error,omitempty"`
	DryRun  bool   `json:"dryRun,omitempty"`
	Dropped bool   `json:"dropped,omitempty"` // an outbox entry not retried (Error says why), a warning
}

// Deliver sends the outbox, the notes, then the open alerts of s again to Alertmanager, which
// forgets an alert at its endsAt (a failed refresh is reported, not kept: the next run refreshes again).
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
	// The retries get at most half of the send window: each may wait out its budget
	// on a receiver that never answers, and must leave this run's own pages time.
	rctx := sctx
	if deadline, ok := sctx.Deadline(); ok {
		var cancel context.CancelFunc
		rctx, cancel = context.WithDeadline(sctx, time.Now().Add(time.Until(deadline)/2))
		defer cancel()
	}
	out = append(out, d.retryOutbox(ctx, rctx, s, now)...)
	stale := maps.Clone(s.Alerts) // what this run sends is fresh, with this run's words: not refreshed
	for _, n := range notes {
		delete(stale, n.Event)
		if d.Events != nil {
			err := d.Events(sctx, n)
			out = append(out, Delivery{ID: n.ID, Event: n.Event, Sink: KubernetesEvent, OK: err == nil, Error: errText(err)})
		}
		p := state.Pending{ID: n.ID, Event: n.Event, CreatedAt: now.UTC(), Sinks: alert.SinkNames(d.Sinks)}
		out = append(out, d.send(ctx, sctx, n, &p, false)...)
		if len(p.Sinks) > 0 {
			p.Payload, _ = json.Marshal(n) // plain data: cannot fail
			s.Outbox = append(s.Outbox, p)
		}
	}
	for _, sink := range d.Sinks {
		if r, ok := sink.(*Alertmanager); ok {
			if n, err := r.Refresh(sctx, stale, now); n > 0 || err != nil {
				out = append(out, Delivery{Event: EventRefresh, Sink: sink.Name(), OK: err == nil, Error: errText(err)})
			}
		}
	}
	return out
}

// errText is err's text, "" for none.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

const retriesOutOfTime = "not retried in this run: the retries' share of the send window was spent " +
	"(this run's own alerts keep the rest); kept for the next run"

// retryOutbox sends the outbox again, the words rebuilt from the event table and the configuration.
func (d *Dispatcher) retryOutbox(ctx, sctx context.Context, s *state.State, now time.Time) []Delivery {
	var out []Delivery
	kept := s.Outbox[:0]
	for _, p := range s.Outbox {
		var n alert.Notification
		spec, known := alert.Lookup(p.Event)
		if err := json.Unmarshal(p.Payload, &n); err != nil || !known || now.Sub(p.CreatedAt) > MaxPendingAge {
			out = append(out, Delivery{ID: p.ID, Event: p.Event, Sink: "outbox", Dropped: true,
				Error: "unreadable, or undelivered for a day (each failed attempt was logged, with a Warning Event, when it happened)"})
			continue
		}
		n.SchemaVersion, n.Severity, n.NextStep = alert.SchemaVersion, spec.Severity, spec.NextStep
		d.Source.Stamp(&n)
		out = append(out, d.send(ctx, sctx, n, &p, true)...)
		if len(p.Sinks) > 0 {
			kept = append(kept, p)
		}
	}
	s.Outbox = kept
	return out
}

// send delivers n to the sinks p names, leaving in p those that failed (told to OnFailure);
// a retry without time left in sctx is kept without an attempt.
func (d *Dispatcher) send(ctx, sctx context.Context, n alert.Notification, p *state.Pending, retry bool) []Delivery {
	var out []Delivery
	var failed []string
	attempted := false
	for _, sink := range d.Sinks {
		if !slices.Contains(p.Sinks, sink.Name()) {
			continue
		}
		del := Delivery{ID: p.ID, Event: p.Event, Sink: sink.Name(), Retry: retry, Kept: true, Error: retriesOutOfTime}
		if !retry || sctx.Err() == nil {
			attempted = true
			err := sink.Send(sctx, n)
			del.OK, del.Kept, del.Error = err == nil, err != nil, errText(err)
			if err != nil {
				p.LastError = del.Error
				if d.OnFailure != nil {
					d.OnFailure(ctx, n, sink.Name(), err)
				}
			}
		}
		if !del.OK {
			failed = append(failed, sink.Name())
		}
		out = append(out, del)
	}
	if attempted {
		p.Attempts++
	}
	p.Sinks = failed
	return out
}

// EventRefresh names refresh deliveries in reports and logs; it is no alert event.
const EventRefresh = "refresh"
