package integration

import (
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/decide"
)

// TestLeaseExpiringDuringTheReadsStillScrapesTheLeader: the decision judges the
// leader Lease's expiry at the observation's time (when its reads began), and the
// observer scrapes exactly the pods the decision judges. A Lease that runs out
// while the reads are under way (its read held 5 s by the proxy, on the virtual
// clock) still names the leader: it is scraped and judged healthy, not judged
// unread ("metrics not scraped", unknown). On the real API server, which dates
// the Lease's last write itself.
func TestLeaseExpiringDuringTheReadsStillScrapesTheLeader(t *testing.T) {
	v := newVirtualScenario(t)
	proxy := v.proxied(t)
	ctx, cancel := testenv.Ctx()
	defer cancel()
	holder, seconds, renewed := v.pod.Name, int32(15), metav1.NewMicroTime(time.Now())
	lease, err := env.Client.CoordinationV1().Leases(v.ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler", Namespace: v.ns},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &renewed},
	}, metav1.CreateOptions{})
	must(t, err)
	written := lease.ManagedFields[0].Time.Time // the renewal, by the API server's clock
	expires := written.Add(time.Duration(seconds)*time.Second + decide.ClockSkewTolerance)
	v.clk.SetTime(expires.Add(-time.Second))
	proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/leases/agentenv-scheduler") {
			return v.clk.holdFor(5 * time.Second)
		}
		return nil
	})

	before := v.metrics.Hits()
	r := v.check("--leader-lease", "agentenv-scheduler")
	if !v.clk.Now().After(expires) {
		t.Fatalf("the run ended at %s, before the Lease expired (%s): the read was not held", v.clk.Now(), expires)
	}
	r.expect(t, 0, "healthy", "none")
	if got := v.metrics.Hits() - before; got != 1 || len(r.report.Targets) != 1 || r.report.Targets[0].Pod != holder {
		t.Errorf("%d scrapes, targets %+v: want the leader %s scraped once and judged", got, r.report.Targets, holder)
	}
}
