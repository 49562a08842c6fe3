package observe

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentenv/watchdog/pkg/decide"
)

// TestLeaderWhoseLeaseExpiresDuringTheReadsIsScraped: the observation is dated
// when it began, and decide judges the Lease's expiry at that time. A Lease that
// expires while the reads are under way (a slow API server) still names the
// leader decide judges: the observer scrapes exactly the pods decide judges, so
// that leader is scraped, not judged unread.
func TestLeaderWhoseLeaseExpiresDuringTheReadsIsScraped(t *testing.T) {
	began := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(began)
	const duration = 15 * time.Second
	// Renewed so that it expires (past decide.ClockSkewTolerance) one second after began.
	renewed := metav1.NewMicroTime(began.Add(-duration - decide.ClockSkewTolerance + time.Second))
	holder, seconds := "sched-0", int32(duration/time.Second)
	c := fakeAPI(t, runningPods(2), func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/leases/sched") {
			http.NotFound(w, r)
			return
		}
		clk.SetTime(began.Add(5 * time.Second)) // the read is slow: the Lease expires meanwhile
		_ = json.NewEncoder(w).Encode(&coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &renewed, LeaseDurationSeconds: &seconds}})
	})
	g := &gatedMetrics{want: 1, open: make(chan struct{})}
	metrics := httptest.NewServer(g)
	defer metrics.Close()
	o := newObserver(t, nil, metrics.URL)
	o.Client, o.Endpoints.Client, o.Clock = c, c, clk
	o.Reads.LeaderLease = "sched"
	obs, err := o.Observe(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	judged, _, problem := decide.Judged(obs, o.Reads.Selection)
	if len(judged) != 1 || judged[0].Name != holder {
		t.Fatalf("decide judges %+v (%s), want the leader %s: the Lease had not expired when the observation began", judged, problem, holder)
	}
	for _, p := range obs.Pods {
		scraped := p.Sample != nil || p.ScrapeErr != nil
		if want := p.Name == holder; scraped != want {
			t.Errorf("pod %s scraped: %v, want %v (decide judges %s)", p.Name, scraped, want, holder)
		}
	}
}
