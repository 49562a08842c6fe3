package deliver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"
)

// One peer of an HA group that never answers must not use up the hold's deadline
// before the others are asked: the hold would then fail open and a restart go
// ahead while the other peer reports the alerts that should have held it. Built as
// buildHold builds it, with the pass's deadline equal to the attempt timeout (both
// 10 s by default).
func TestHoldAsksEveryPeerWhenOneHangs(t *testing.T) {
	release := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hung.Close)
	t.Cleanup(func() { close(release) })
	firing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`[{"labels":{"alertname":"etcdNoLeader","instance":"etcd-0"}}]`))
	}))
	t.Cleanup(firing.Close)

	const timeout = time.Second
	am, err := NewAlertmanager([]string{hung.URL, firing.URL}, timeout, DefaultAttempts, DefaultBudget)
	if err != nil {
		t.Fatal(err)
	}
	hold := &AlertHold{Alertmanager: am, Sets: []amlabels.Matchers{mustMatchers(t, `alertname=~"etcd.*"`)}}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	read := hold.Read(ctx)
	if read.Err != nil || len(read.Firing) != 1 || read.Firing[0] != `etcdNoLeader{instance="etcd-0"}` {
		t.Fatalf("the peer that answers was not heard: firing %q, error %v", read.Firing, read.Err)
	}
}

// A broad matcher (every critical alert) must not hold the restart on the chart's
// own rules about the same wedge: they fire because the scheduler is wedged.
func TestHoldIgnoresTheChartsRulesAboutTheWedge(t *testing.T) {
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"labels":{"alertname":"AgentenvSchedulerWedgedTooLong","severity":"critical"}},` +
			`{"labels":{"alertname":"AgentenvSchedulerDiscoveryWedged","severity":"critical"}},` +
			`{"labels":{"alertname":"etcdNoLeader","severity":"critical"}}]`))
	}))
	t.Cleanup(peer.Close)
	am, err := NewAlertmanager([]string{peer.URL}, time.Second, 1, DefaultBudget)
	if err != nil {
		t.Fatal(err)
	}
	hold := &AlertHold{Alertmanager: am, Sets: []amlabels.Matchers{mustMatchers(t, `severity="critical"`)}}
	read := hold.Read(context.Background())
	if read.Err != nil || len(read.Firing) != 1 || read.Firing[0] != `etcdNoLeader{severity="critical"}` {
		t.Fatalf("firing %q (error %v), want only etcdNoLeader", read.Firing, read.Err)
	}
}
