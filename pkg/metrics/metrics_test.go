package metrics

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/state"
)

// The ready and expected node gauges are what a dashboard draws per scheduler pod:
// set for judged pods whose numbers are known, absent otherwise, and forgotten with
// the pod (a deleted pod's last numbers must not stay on the graph).
func TestNodeGauges(t *testing.T) {
	m := New(Options{})
	n := func(v int) *int { return &v }
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m.Observe(&check.Report{Targets: []decide.Target{
		{Pod: "sched-a", Judged: true, Verdict: state.VerdictWedged, Ready: n(0), Expected: n(3)},
		{Pod: "sched-b", Judged: true, Verdict: state.VerdictUnknown, Expected: n(3)},
		{Pod: "sched-c", Judged: false, Ready: n(0), Expected: n(3)},
	}}, nil, time.Second, now)
	if got, want := nodeGauges(t, m), "agentenv_watchdog_pod_expected_nodes{sched-a} 3, agentenv_watchdog_pod_expected_nodes{sched-b} 3, agentenv_watchdog_pod_ready_nodes{sched-a} 0"; got != want {
		t.Errorf("after the first pass:\n got %s\nwant %s", got, want)
	}
	m.Observe(&check.Report{Targets: []decide.Target{
		{Pod: "sched-d", Judged: true, Verdict: state.VerdictHealthy, Ready: n(3), Expected: n(3)},
	}}, nil, time.Second, now.Add(time.Minute))
	if got, want := nodeGauges(t, m), "agentenv_watchdog_pod_expected_nodes{sched-d} 3, agentenv_watchdog_pod_ready_nodes{sched-d} 3"; got != want {
		t.Errorf("after the second pass:\n got %s\nwant %s", got, want)
	}
}

// nodeGauges lists the series of the two node gauges as "name{pod} value", sorted.
func nodeGauges(t *testing.T, m *Metrics) string {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range families {
		if f.GetName() != "agentenv_watchdog_pod_ready_nodes" && f.GetName() != "agentenv_watchdog_pod_expected_nodes" {
			continue
		}
		for _, s := range f.GetMetric() {
			var pod string
			for _, l := range s.GetLabel() {
				if l.GetName() == "pod" {
					pod = l.GetValue()
				}
			}
			out = append(out, fmt.Sprintf("%s{%s} %g", f.GetName(), pod, s.GetGauge().GetValue()))
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}

// An outbox entry dropped unread (anyone who may edit the state ConfigMap writes
// its event) is no delivery: it adds no series to the alerts counter, whose event
// and sink labels stay the watchdog's own however many such entries come.
func TestDroppedOutboxEntriesAddNoSeries(t *testing.T) {
	m := New(Options{Sinks: []string{"webhook"}})
	count := func() int {
		families, err := m.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() == "agentenv_watchdog_alerts_total" {
				return len(f.GetMetric())
			}
		}
		return 0
	}
	before := count()
	for i := range 100 {
		m.Observe(&check.Report{Alerts: []deliver.Delivery{{ID: "x", Event: fmt.Sprintf("made-up-%d", i), Sink: "outbox", Dropped: true, Error: "not an event of the watchdog's"}}},
			nil, time.Second, time.Now())
	}
	if after := count(); after != before {
		t.Errorf("%d series after 100 dropped entries, want %d", after, before)
	}
}
