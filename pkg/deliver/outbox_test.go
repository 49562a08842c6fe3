package deliver

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// memorySink records what it is sent, and refuses while fail is set.
type memorySink struct {
	name string
	mu   sync.Mutex
	fail bool
	sent []alert.Notification
}

func (m *memorySink) Name() string { return m.name }

func (m *memorySink) Send(_ context.Context, n alert.Notification) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fail {
		return errors.New(m.name + ": answered 503")
	}
	m.sent = append(m.sent, n)
	return nil
}

func (m *memorySink) got() []alert.Notification {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]alert.Notification(nil), m.sent...)
}

// keep runs one delivery of n that the sink refuses, and returns the state with
// n kept in its outbox.
func keep(t *testing.T, n alert.Notification) (*state.State, *memorySink, *Dispatcher) {
	t.Helper()
	sink := &memorySink{name: "webhook", fail: true}
	d := &Dispatcher{Sinks: []alert.Sink{sink}, Source: alert.Source{Cluster: n.Cluster, Namespace: n.Namespace, Version: n.Watchdog, Labels: n.Labels}}
	s := state.New()
	d.Deliver(context.Background(), s, []alert.Notification{n}, n.Time)
	if len(s.Outbox) != 1 {
		t.Fatalf("outbox %+v after a refused delivery", s.Outbox)
	}
	sink.fail = false
	return s, sink, d
}

// reencode puts the state through its document codec, as the ConfigMap does.
func reencode(t *testing.T, s *state.State, now time.Time) *state.State {
	t.Helper()
	raw, err := state.Encode(s, now)
	if err != nil {
		t.Fatal(err)
	}
	back, err := state.Decode(raw)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// TestOutboxRetrySaysWhatTheOriginalSaid: an alert a receiver refused is retried
// by the next run as the same notification, field for field (severity and next
// step from the event table, cluster, namespace and version from the
// configuration). Every field of Notification is set in the fixture, so a field
// added later is either carried or rebuilt, or this fails.
func TestOutboxRetrySaysWhatTheOriginalSaid(t *testing.T) {
	n := goldenNotification()
	n.Reminder, n.Shadow = true, true
	n.Paused = "paused until 2026-03-01T12:00:00Z by annotation on Deployment agentenv-scheduler: etcd maintenance"
	n.Closes = []alert.Closed{{Event: alert.EventBlind, OpenedAt: n.Time.Add(-time.Hour)}}
	n.Labels = map[string]string{"team": "scheduling"}
	v := reflect.ValueOf(n)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; v.Field(i).IsZero() && name != "Test" && name != "DryRun" {
			t.Fatalf("the fixture leaves Notification.%s zero: set it, so the round trip covers it", name)
		}
	}
	s, sink, d := keep(t, n)
	s = reencode(t, s, n.Time)
	ds := d.Deliver(context.Background(), s, nil, n.Time.Add(5*time.Minute))
	got := sink.got()
	if len(got) != 1 || len(ds) != 1 || !ds[0].OK || !ds[0].Retry {
		t.Fatalf("sent %d, deliveries %+v", len(got), ds)
	}
	if !reflect.DeepEqual(got[0], n) {
		t.Errorf("the retry differs from the original:\n got %+v\nwant %+v", got[0], n)
	}
	if len(s.Outbox) != 0 {
		t.Errorf("outbox %+v after the retry", s.Outbox)
	}
}

// TestOutboxDropsADayOldEntry: an entry undelivered for MaxPendingAge is dropped
// with a warning, not sent.
func TestOutboxDropsADayOldEntry(t *testing.T) {
	n := goldenNotification()
	s, sink, d := keep(t, n)
	ds := d.Deliver(context.Background(), s, nil, n.Time.Add(MaxPendingAge+time.Minute))
	if got := sink.got(); len(got) != 0 || len(ds) != 1 || !ds[0].Dropped || len(s.Outbox) != 0 {
		t.Errorf("sent %d, deliveries %+v, outbox %d: want it dropped", len(got), ds, len(s.Outbox))
	}
}
