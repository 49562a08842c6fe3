package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/outbox"
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

var outboxKey = []byte("outbox-test-key-of-thirty-two-bytes")

func outboxConfig(key []byte) outbox.Config {
	n := goldenNotification()
	return outbox.Config{Key: key, Source: alert.Source{Cluster: n.Cluster, Namespace: n.Namespace, Version: n.Watchdog}}
}

// keep runs one delivery of n that the sink refuses, and returns the state with
// n kept in its outbox.
func keep(t *testing.T, key []byte, n alert.Notification) (*state.State, *memorySink, *Dispatcher) {
	t.Helper()
	sink := &memorySink{name: "webhook", fail: true}
	d := &Dispatcher{Sinks: []alert.Sink{sink}, Outbox: outboxConfig(key)}
	d.Outbox.Source.Labels = n.Labels // the configuration's --alert-labels, as the run's
	s := state.New()
	d.Deliver(context.Background(), s, []alert.Notification{n}, n.Time)
	if len(s.Outbox) != 1 || (len(key) > 0) != (s.Outbox[0].Seal != "") {
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
// by the next run as the same notification, field for field: the facts from the
// sealed entry, the rest rebuilt (severity and next step from the event table,
// cluster, namespace and version from the configuration). Every field of
// Notification is set in the fixture, so a field added later (a shadow marker,
// say) is either carried or rebuilt, or this fails.
func TestOutboxRetrySaysWhatTheOriginalSaid(t *testing.T) {
	n := goldenNotification()
	n.Reminder, n.Shadow = true, true
	n.Paused = "paused until 2026-03-01T12:00:00Z by annotation on Deployment agentenv-scheduler: etcd maintenance"
	n.Closes = []alert.Closed{{Event: alert.EventBlind, OpenedAt: n.Time.Add(-time.Hour)}}
	n.Labels = map[string]string{"team": "scheduling"}
	v := reflect.ValueOf(n)
	for i := range v.NumField() {
		// Test and DryRun are never kept for retry (TestOutboxRefusesWhatItDidNotWrite).
		if name := v.Type().Field(i).Name; v.Field(i).IsZero() && name != "Test" && name != "DryRun" {
			t.Fatalf("the fixture leaves Notification.%s zero: set it, so the round trip covers it", name)
		}
	}
	for _, key := range [][]byte{outboxKey, nil} {
		s, sink, d := keep(t, key, n)
		s = reencode(t, s, n.Time)
		ds := d.Deliver(context.Background(), s, nil, n.Time.Add(5*time.Minute))
		got := sink.got()
		if len(got) != 1 || len(ds) != 1 || !ds[0].OK || !ds[0].Retry || ds[0].Unauthenticated != (key == nil) {
			t.Fatalf("key %q: sent %d, deliveries %+v", key, len(got), ds)
		}
		if !reflect.DeepEqual(got[0], n) {
			t.Errorf("key %q: the retry differs from the original:\n got %+v\nwant %+v", key, got[0], n)
		}
		if len(s.Outbox) != 0 {
			t.Errorf("key %q: outbox %+v after the retry", key, s.Outbox)
		}
	}
}

// TestOutboxRefusesWhatItDidNotWrite: with a key, an entry is delivered only with
// the seal the watchdog gave it, over the very facts it kept: each forgery a
// ConfigMap editor could write is dropped with a warning (Dropped), never sent;
// the genuine entry beside them is still retried. Without a key the same
// forgeries are rebuilt: the labels and text the configuration and the event
// table own are never the entry's.
func TestOutboxRefusesWhatItDidNotWrite(t *testing.T) {
	n := goldenNotification()
	now := n.Time.Add(5 * time.Minute)
	forge := func(p state.Pending, edit func(m map[string]any)) state.Pending {
		var m map[string]any
		if err := json.Unmarshal(p.Payload, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		p.Payload = b
		return p
	}
	s, _, _ := keep(t, outboxKey, n)
	genuine := s.Outbox[0]
	// The example: labels and text of the attacker's choosing.
	hostile := func(m map[string]any) {
		m["severity"], m["namespace"], m["cluster"] = "info", "kube-system", "prod-other"
		m["reason"], m["pod"] = "<!channel> call +1 555 0100 now", "agentenv-scheduler-evil"
	}
	withID := func(p state.Pending, id string) state.Pending {
		p = forge(p, func(m map[string]any) { m["id"] = id })
		p.ID = id
		return p
	}
	otherKey, _, _ := keep(t, []byte("another key"), n)
	otherNS := outboxConfig(outboxKey)
	otherNS.Source.Namespace = "agentenv-other"
	forgeries := map[string]state.Pending{
		"no seal":                      func() state.Pending { p := withID(forge(genuine, hostile), "f1"); p.Seal = ""; return p }(),
		"genuine seal, changed reason": withID(forge(genuine, func(m map[string]any) { m["reason"] = "restart everything" }), genuine.ID),
		"genuine seal, other event": func() state.Pending {
			p := forge(genuine, func(m map[string]any) { m["event"] = alert.EventRecovered })
			p.Event = alert.EventRecovered
			return p
		}(),
		"genuine seal, other time":     func() state.Pending { p := genuine; p.CreatedAt = p.CreatedAt.Add(time.Minute); return p }(),
		"sealed under another key":     otherKey.Outbox[0],
		"sealed for another namespace": func() state.Pending { p := genuine; p.Seal = otherNS.Seal(p, p.Payload); return p }(),
		"a field the watchdog never writes": func() state.Pending {
			p := forge(genuine, func(m map[string]any) { m["mention"] = "<!here>" })
			p.Seal = outboxConfig(outboxKey).Seal(p, p.Payload)
			return p
		}(),
	}
	for name, f := range forgeries {
		t.Run(name, func(t *testing.T) {
			sink := &memorySink{name: "webhook"}
			d := &Dispatcher{Sinks: []alert.Sink{sink}, Outbox: outboxConfig(outboxKey)}
			st := state.New()
			st.Outbox = []state.Pending{f, genuine}
			st = reencode(t, st, now)
			ds := d.Deliver(context.Background(), st, nil, now)
			got := sink.got()
			if len(got) != 1 || got[0].ID != genuine.ID || !reflect.DeepEqual(got[0], n) {
				t.Fatalf("sent %+v, want the genuine entry alone, as written", got)
			}
			dropped := 0
			for _, del := range ds {
				if del.Dropped {
					dropped++
					if del.OK || del.Error == "" {
						t.Errorf("dropped delivery %+v", del)
					}
				}
			}
			if dropped != 1 || len(st.Outbox) != 0 {
				t.Errorf("deliveries %+v, outbox %+v: want the forgery dropped once and nothing kept", ds, st.Outbox)
			}
		})
	}

	// Without a key nothing can be authenticated, but what the entry says of
	// itself beyond its facts is not believed.
	t.Run("no key: rebuilt", func(t *testing.T) {
		s, sink, d := keep(t, nil, n)
		s.Outbox[0] = forge(s.Outbox[0], hostile)
		d.Deliver(context.Background(), s, nil, now)
		got := sink.got()
		if len(got) != 1 {
			t.Fatalf("sent %+v", got)
		}
		g := got[0]
		if g.Severity != alert.SeverityCritical || g.Namespace != n.Namespace || g.Cluster != n.Cluster || g.Watchdog != n.Watchdog || g.NextStep != alert.Spec(alert.EventWedged).NextStep {
			t.Errorf("a retried alert kept the entry's severity, namespace, cluster, version or next step: %+v", g)
		}
	})
	for name, edit := range map[string]func(m map[string]any){
		"unknown event":        func(m map[string]any) { m["event"] = "pwned" },
		"a test alert":         func(m map[string]any) { m["test"] = true },
		"a dry run":            func(m map[string]any) { m["dryRun"] = true },
		"not a pod name":       func(m map[string]any) { m["pod"] = "<@U024BE7LH>" },
		"not a verdict":        func(m map[string]any) { m["verdict"] = "wedged <!channel>" },
		"closes a fake alert":  func(m map[string]any) { m["closes"] = []map[string]any{{"event": "pwned", "openedAt": n.Time}} },
		"a time of last year":  func(m map[string]any) { m["time"] = n.Time.AddDate(-1, 0, 0) },
		"an unknown field":     func(m map[string]any) { m["mention"] = "<!here>" },
		"another notification": func(m map[string]any) { m["id"] = "0000000000000000" },
	} {
		t.Run("no key: "+name, func(t *testing.T) {
			s, sink, d := keep(t, nil, n)
			s.Outbox[0] = forge(s.Outbox[0], edit)
			if name == "unknown event" {
				s.Outbox[0].Event = "pwned"
			}
			ds := d.Deliver(context.Background(), s, nil, now)
			if got := sink.got(); len(got) != 0 || len(ds) != 1 || !ds[0].Dropped || len(s.Outbox) != 0 {
				t.Errorf("sent %+v, deliveries %+v, outbox %+v: want it dropped", got, ds, s.Outbox)
			}
			if strings.Contains(ds[0].Error, "<") {
				t.Errorf("the dropped delivery's error repeats the entry's text: %q", ds[0].Error)
			}
		})
	}
}

// TestOutboxExpiredEntrySaysNothingOfItsOwn: an entry older than outbox.MaxPendingAge is
// dropped with a warning, and the warning is the watchdog's: with a key, a forged
// entry dated a day back is refused as unsealed (not reported as an alert the
// watchdog tried to deliver for a day); with or without a key, neither its
// lastError nor its sinks, which no seal covers, are repeated. A genuine expired
// entry says how often it was tried.
func TestOutboxExpiredEntrySaysNothingOfItsOwn(t *testing.T) {
	n := goldenNotification()
	later := n.Time.Add(outbox.MaxPendingAge + time.Minute)
	const hostile = "<!channel> the scheduler is fine, ignore the pages"
	for _, key := range [][]byte{outboxKey, nil} {
		t.Run(map[bool]string{true: "with key", false: "without key"}[key != nil], func(t *testing.T) {
			s, sink, d := keep(t, key, n)
			genuine := s.Outbox[0]
			genuine.LastError = hostile
			genuine.Sinks = []string{"webhook", hostile}
			forged := genuine
			forged.ID, forged.Seal = "f1f1f1f1f1f1f1f1", ""
			s.Outbox = []state.Pending{genuine, forged}
			ds := d.Deliver(context.Background(), s, nil, later)
			if got := sink.got(); len(got) != 0 || len(s.Outbox) != 0 || len(ds) != 2 {
				t.Fatalf("sent %+v, outbox %+v, deliveries %+v: want both dropped, nothing sent", got, s.Outbox, ds)
			}
			for _, del := range ds {
				if !del.Dropped || del.OK {
					t.Errorf("delivery %+v, want dropped", del)
				}
				if text := del.Sink + " " + del.Error; strings.Contains(text, "<") || strings.Contains(text, "ignore") {
					t.Errorf("the warning repeats the entry's own text: %+v", del)
				}
			}
			if !strings.Contains(ds[0].Error, "undelivered after 1 attempts") {
				t.Errorf("the genuine expired entry: %q", ds[0].Error)
			}
			if key != nil && !strings.Contains(ds[1].Error, "not sealed") {
				t.Errorf("with a key, the forged expired entry: %q, want it refused as unsealed", ds[1].Error)
			}
		})
	}
}

// TestOutboxSealedEntryOfAFastClockIsRetried: a CronJob's runs land on different
// nodes, and a node's clock may run ahead (decide.ClockSkewTolerance). A page kept by a run whose clock was ahead of the next run's by more
// than a minute is the watchdog's own, sealed, and is retried, not dropped as "not
// of the last day"; without a key, where nothing is authenticated, a time ahead
// of the run's clock is still refused. Skews swept from behind to a day ahead.
func TestOutboxSealedEntryOfAFastClockIsRetried(t *testing.T) {
	n := goldenNotification()
	for _, ahead := range []time.Duration{-time.Hour, 0, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 3 * time.Hour, outbox.MaxPendingAge} {
		// The next run, 5 minutes later, on a clock `ahead` behind the writer's.
		now := n.Time.Add(5*time.Minute - ahead)
		for _, key := range [][]byte{outboxKey, nil} {
			s, sink, d := keep(t, key, n)
			s = reencode(t, s, n.Time)
			ds := d.Deliver(context.Background(), s, nil, now)
			sent := len(sink.got()) == 1
			want := key != nil || ahead <= 5*time.Minute+time.Minute
			if sent != want {
				t.Errorf("writer's clock %s ahead, key %v: sent %v, want %v (deliveries %+v)", ahead, key != nil, sent, want, ds)
			}
		}
	}
	// The 0.1.0 upgrade: an entry without a seal says so, not only "someone else".
	s, sink, d := keep(t, outboxKey, n)
	s.Outbox[0].Seal = ""
	ds := d.Deliver(context.Background(), s, nil, n.Time.Add(5*time.Minute))
	if len(sink.got()) != 0 || len(ds) != 1 || !ds[0].Dropped || !strings.Contains(ds[0].Error, "0.1.0") {
		t.Errorf("an unsealed entry with a key: deliveries %+v", ds)
	}
}

// TestOutboxSendsEachSinkOnce: an entry's sinks are not sealed (they change on
// every retry), so an editor of the state may list a sink many times in a genuine
// entry. Each configured sink is sent an entry at most once per run: a list of a
// thousand names neither spams the receiver nor spends the run's send deadline
// that the run's own new alerts need.
func TestOutboxSendsEachSinkOnce(t *testing.T) {
	n := goldenNotification()
	for _, key := range [][]byte{outboxKey, nil} {
		s, sink, d := keep(t, key, n)
		sinks := make([]string, 1000)
		for i := range sinks {
			sinks[i] = "webhook"
		}
		s.Outbox[0].Sinks = sinks
		ds := d.Deliver(context.Background(), s, nil, n.Time.Add(5*time.Minute))
		if got := len(sink.got()); got != 1 || len(ds) != 1 {
			t.Errorf("key %v: the entry was sent %d times (%d deliveries), want once", key != nil, got, len(ds))
		}
		// Refused again: kept once for the next run, not a thousand times.
		s, sink, d = keep(t, key, n)
		s.Outbox[0].Sinks = sinks
		sink.fail = true
		d.Deliver(context.Background(), s, nil, n.Time.Add(5*time.Minute))
		if len(s.Outbox) != 1 || len(s.Outbox[0].Sinks) != 1 {
			t.Errorf("key %v: kept %d entries (%v), want one entry for one sink", key != nil, len(s.Outbox), len(s.Outbox) > 0 && len(s.Outbox[0].Sinks) > 1)
		}
	}
}

// TestOutboxDeliversEachEntryOnce: the state's outbox is read from a document an
// editor may have written. A thousand copies of one genuine sealed entry are one
// alert: read back through the document codec, the outbox holds no more than
// its cap, and the alert is sent once (one failure, one warning, when the
// receiver refuses), not once per copy.
func TestOutboxDeliversEachEntryOnce(t *testing.T) {
	n := goldenNotification()
	for _, fail := range []bool{false, true} {
		s, sink, d := keep(t, outboxKey, n)
		copies := make([]state.Pending, 1000)
		for i := range copies {
			copies[i] = s.Outbox[0]
		}
		s.Outbox = copies
		now := n.Time.Add(5 * time.Minute)
		s = reencode(t, s, now) // Encode prunes: put the copies back as an editor would
		s.Outbox = copies
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if s, err = state.Decode(raw); err != nil {
			t.Fatal(err)
		}
		if len(s.Outbox) > state.MaxOutbox {
			t.Errorf("decoded outbox holds %d entries, cap %d", len(s.Outbox), state.MaxOutbox)
		}
		failures := 0
		d.OnFailure = func(context.Context, alert.Notification, string, error) { failures++ }
		sink.fail = fail
		d.Deliver(context.Background(), s, nil, now)
		if fail {
			if failures != 1 || len(s.Outbox) != 1 {
				t.Errorf("refused: %d failures, %d entries kept, want 1 and 1", failures, len(s.Outbox))
			}
		} else if got := len(sink.got()); got != 1 {
			t.Errorf("sent %d times, want once", got)
		}
	}
}

// TestOutboxRefusesReplayOfADeliveredEntry: a genuine sealed entry put back
// after it was delivered (from an old copy of the ConfigMap, say) is not sent
// again while it could still be retried; the watchdog remembers what it
// delivered for that long, within a bound.
func TestOutboxRefusesReplayOfADeliveredEntry(t *testing.T) {
	n := goldenNotification()
	s, sink, d := keep(t, outboxKey, n)
	old := s.Outbox[0]
	now := n.Time.Add(5 * time.Minute)
	d.Deliver(context.Background(), s, nil, now)
	if len(sink.got()) != 1 || len(s.Outbox) != 0 {
		t.Fatalf("first retry: sent %d, outbox %d", len(sink.got()), len(s.Outbox))
	}
	for _, later := range []time.Duration{10 * time.Minute, 12 * time.Hour, outbox.MaxPendingAge - time.Minute} {
		s = reencode(t, s, now)
		s.Outbox = append(s.Outbox, old)
		s = reencode(t, s, n.Time.Add(later))
		ds := d.Deliver(context.Background(), s, nil, n.Time.Add(later))
		if len(sink.got()) != 1 || len(ds) != 1 || !ds[0].Dropped || !strings.Contains(ds[0].Error, "already delivered") {
			t.Errorf("replayed %s later: sent %d times in all, deliveries %+v", later, len(sink.got()), ds)
		}
	}
	// The memory is bounded: however many entries were delivered.
	for i := range 5 * state.MaxDelivered {
		s.Delivered = append(s.Delivered, state.DeliveredEntry{ID: fmt.Sprintf("%016x", i), CreatedAt: now})
	}
	if s = reencode(t, s, now); len(s.Delivered) > state.MaxDelivered {
		t.Errorf("remembers %d delivered entries, bound %d", len(s.Delivered), state.MaxDelivered)
	}
}

// TestReservedEntriesWaitForTheirRun: what Reserve puts in the outbox belongs to
// the run that is sending it: another run leaves it alone for ReservedFor, then
// retries it, as the page of a run that ended before sending.
func TestReservedEntriesWaitForTheirRun(t *testing.T) {
	n := goldenNotification()
	sink := &memorySink{name: "webhook"}
	d := &Dispatcher{Sinks: []alert.Sink{sink}, Outbox: outboxConfig(outboxKey), ReservedFor: 3 * time.Minute}
	s := state.New()
	d.Reserve(s, []alert.Notification{n}, n.Time)
	if len(s.Outbox) != 1 || s.Outbox[0].Attempts != 0 || s.Outbox[0].Sinks[0] != "webhook" {
		t.Fatalf("reserved %+v", s.Outbox)
	}
	s = reencode(t, s, n.Time)
	if ds := d.Deliver(context.Background(), s, nil, n.Time.Add(time.Minute)); len(ds) != 0 || len(sink.got()) != 0 || len(s.Outbox) != 1 {
		t.Fatalf("within ReservedFor: deliveries %+v, sent %d, outbox %d", ds, len(sink.got()), len(s.Outbox))
	}
	ds := d.Deliver(context.Background(), s, nil, n.Time.Add(4*time.Minute))
	if len(ds) != 1 || !ds[0].OK || !ds[0].Retry || len(sink.got()) != 1 || len(s.Outbox) != 0 {
		t.Fatalf("after ReservedFor: deliveries %+v, sent %d, outbox %+v", ds, len(sink.got()), s.Outbox)
	}
}
