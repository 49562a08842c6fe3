package alert

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/agentenv/watchdog/pkg/state"
)

// Closed is one alert a recovered notification closes: receivers that track alerts
// by identity (Alertmanager) resolve exactly these.
type Closed struct {
	Event    string    `json:"event"`
	Pod      string    `json:"pod,omitempty"`
	OpenedAt time.Time `json:"openedAt"`
}

// closedAlerts lists the open alerts in event order.
func closedAlerts(open map[string]*state.Alert) []Closed {
	out := make([]Closed, 0, len(open))
	for _, ev := range slices.Sorted(maps.Keys(open)) {
		if a := open[ev]; a != nil {
			out = append(out, Closed{Event: ev, Pod: a.Pod, OpenedAt: a.OpenedAt.UTC()})
		}
	}
	return out
}

// Refresher is a sink whose receiver forgets an alert that is not sent again
// (Alertmanager resolves it at its endsAt). The dispatcher hands it the open
// alerts once per run, after delivery, whether or not this run sent anything.
// Refresh returns how many alerts it sent again (0: nothing to do, no request).
type Refresher interface {
	Refresh(ctx context.Context, open map[string]*state.Alert, now time.Time) (int, error)
}

// EventRefresh names refresh deliveries in reports and logs; it is not an alert
// event and is never sent as one.
const EventRefresh = "refresh"

// Refresh re-sends the open alerts of s to every sink that is a Refresher, within
// SendBy like Deliver. A failed refresh is reported and logged but not kept in the
// outbox: the next run refreshes again. A dry run refreshes nothing.
func (d *Dispatcher) Refresh(ctx context.Context, s *state.State, now time.Time, dryRun bool) []Delivery {
	if dryRun || len(s.Alerts) == 0 {
		return nil
	}
	if !d.SendBy.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.SendBy)
		defer cancel()
	}
	var out []Delivery
	for _, sink := range d.Sinks {
		r, ok := sink.(Refresher)
		if !ok {
			continue
		}
		n, err := r.Refresh(ctx, s.Alerts, now)
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
