package deliver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// The hold decodes a peer's answer as a stream: it keeps a count and the first five
// matches, never the list, and reads at most holdPeerBytes of a peer. An answer cut
// at the bound after matches still holds (counted within the bound); the answers of
// deliveries are read up to 4 KiB (docs/alerts.md, "Delivery").
func TestHoldCountsAStreamOfAlerts(t *testing.T) {
	list := func(n int) string {
		var b strings.Builder
		b.WriteString("[")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"labels":{"alertname":"etcdMembersDown","instance":"etcd-%05d"},"annotations":{"description":%q}}`, i, strings.Repeat("d", 100))
		}
		return b.String() + "]"
	}
	for _, n := range []int{3, 2000, 40000} {
		body := list(n)
		peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, body) }))
		am, err := NewAlertmanager([]string{peer.URL}, 5*time.Second, 1, DefaultBudget)
		if err != nil {
			t.Fatal(err)
		}
		hold := &AlertHold{Alertmanager: am, Sets: []amlabels.Matchers{mustMatchers(t, `alertname=~"etcd.*"`)}}
		read := hold.Read(context.Background())
		peer.Close()
		cut := len(body) > holdPeerBytes
		switch {
		case read.Err != nil:
			t.Errorf("%d alerts (%d bytes): %v", n, len(body), read.Err)
		case len(read.Firing) != min(n, 5) || read.Firing[0] != `etcdMembersDown{instance="etcd-00000"}`:
			t.Errorf("%d alerts: firing %d (%q), want the first %d", n, len(read.Firing), read.Firing[:min(len(read.Firing), 2)], min(n, 5))
		case !cut && read.Count != n, cut && (read.Count < holdPeerBytes/len(list(1)) || read.Count >= n):
			t.Errorf("%d alerts (%d bytes, cut %v): counted %d", n, len(body), cut, read.Count)
		}
	}
	if snippetRead != 4<<10 {
		t.Errorf("deliveries read answers up to %d bytes, docs/alerts.md says 4 KiB", snippetRead)
	}
}
