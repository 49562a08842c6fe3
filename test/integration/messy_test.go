package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// Messy sequences on the real API server (issue: decisions that survive them).

// A restart is never made on lists from the API server's watch cache: before it, the
// pods and EndpointSlices are read again with a consistent read and judged again.
// Here the cache is stale (the proxy answers cached lists with an old snapshot that
// still lists 3 serving nodes), while the nodes are gone: no restart.
func TestStaleCachedListIsReReadBeforeRestart(t *testing.T) {
	f := newFaultScenario(t, fixture(t, "scheduler-metrics-discovery-dead.txt"))
	ctx, cancel := testenv.Ctx()
	defer cancel()
	slices, err := env.Client.DiscoveryV1().EndpointSlices(f.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	slices.Kind, slices.APIVersion = "EndpointSliceList", "discovery.k8s.io/v1"
	stale, err := json.Marshal(slices)
	must(t, err)

	// The healthy path keeps the cheap cached read: every list a first (waiting)
	// run makes carries resourceVersion=0.
	f.proxy.RequestURIs()
	f.wedgedAndDue(t)
	for _, u := range f.proxy.RequestURIs() {
		if isList(u) && !strings.Contains(u, "resourceVersion=0") {
			t.Errorf("a run with nothing to restart made a consistent list: %s", u)
		}
	}

	// The nodes stop serving; the cache (as the proxy tells it) still lists them.
	for i := range slices.Items {
		s := &slices.Items[i]
		no := false
		for j := range s.Endpoints {
			s.Endpoints[j].Conditions.Serving = &no
		}
		_, err := env.Client.DiscoveryV1().EndpointSlices(f.ns).Update(ctx, s, metav1.UpdateOptions{})
		must(t, err)
	}
	f.proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/endpointslices") && r.URL.Query().Get("resourceVersion") == "0" {
			return &testenv.Fault{Body: stale}
		}
		return nil
	})
	r := f.check()
	if len(r.report.Restarts) != 0 || !f.podExists(f.pod.Name) {
		t.Fatalf("restarted on a stale cached list: %s/%s %s", r.report.Verdict, r.report.Action, r.report.Reason)
	}
	r.expect(t, 0, "no-nodes", "none")
	consistent := 0
	for _, u := range f.proxy.RequestURIs() {
		if isList(u) && !strings.Contains(u, "resourceVersion=0") {
			consistent++
		}
	}
	if consistent < 2 {
		t.Errorf("%d consistent lists, want the pods and the EndpointSlices re-read", consistent)
	}
	if r.report.Samples != 2 {
		t.Errorf("samples %d, want 2 (the cached observation and the consistent re-read)", r.report.Samples)
	}
}

func isList(uri string) bool {
	path, _, _ := strings.Cut(uri, "?")
	return strings.HasPrefix(uri, "GET ") && (strings.HasSuffix(path, "/pods") || strings.HasSuffix(path, "/endpointslices"))
}

// A run that cannot list the pods observed nothing: it pauses the wedge clock. The
// gap it leaves is not counted ("ten minutes without information" is not "wedged
// for ten minutes").
func TestFailedRunPausesTheWedgeClockOnTheAPIServer(t *testing.T) {
	f := newFaultScenario(t, fixture(t, "scheduler-metrics-discovery-dead.txt"))
	f.check().expect(t, 0, "wedged", "wait")
	f.proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/pods") {
			return &testenv.Fault{Status: http.StatusInternalServerError}
		}
		return nil
	})
	if r := f.check(); r.code != 1 {
		t.Fatalf("a run that cannot list pods: exit %d, want 1", r.code)
	}
	f.proxy.SetFault(nil)
	waitPastWedgedFor()
	r := f.check()
	r.expect(t, 0, "wedged", "wait")
	if d := r.report.Targets[0].BadFor.D(); d != 0 {
		t.Errorf("wedged for %s after a failed run: its gap was counted", d)
	}
	if !f.podExists(f.pod.Name) {
		t.Error("restarted across a failed run")
	}
}

// A wrong --nodes-service or --nodes-port must not disable detection silently: the
// verdict is unknown, the reason names the flag, the run exits 1, and blind fires.
func TestMisconfiguredNodesServiceIsNotSilent(t *testing.T) {
	for _, c := range []struct {
		flag, value, reason string
	}{
		{"--nodes-service", "agentenv-nodez", "check --nodes-service"},
		{"--nodes-port", "8001", "check --nodes-port"},
	} {
		t.Run(c.flag, func(t *testing.T) {
			s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
			for i := 0; i < 2; i++ {
				r := s.check(c.flag, c.value, "--blind-after", "2")
				if r.code != 1 || r.report.Verdict != "unknown" || !strings.Contains(r.report.Reason, c.reason) || !strings.Contains(r.stderr, c.reason) {
					t.Fatalf("run %d: exit %d %s: %s", i, r.code, r.report.Verdict, r.report.Reason)
				}
			}
			if evs := s.events("agentenv-scheduler-watchdog", alert.Spec(alert.EventBlind).Reason); len(evs) != 1 {
				t.Errorf("%d blind Events after 2 unknown runs, want 1", len(evs))
			}
			if !s.podExists(s.pod.Name) {
				t.Error("restarted on a misconfiguration")
			}
		})
	}
	// Ready above the serving nodes listed: a warning in the output and the log.
	s := newScenario(t, layout{serving: 1, page: fixture(t, "scheduler-metrics-healthy.txt")})
	r := s.check()
	r.expect(t, 0, "healthy", "none")
	warned := false
	for _, w := range r.report.Warnings {
		warned = warned || strings.Contains(w, "but the API server lists only 1 serving")
	}
	if !warned || !strings.Contains(r.stderr, "doubt about the observation") {
		t.Errorf("warnings %q", r.report.Warnings)
	}
}

// A state document written by a newer watchdog is refused, not replaced: exit 1
// naming both versions, nothing restarted, the ConfigMap untouched, watchdog-error.
func TestNewerStateVersionIsRefused(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	newer := fmt.Sprintf(`{"version": %d, "restarts": [{"pod": "x", "uid": "u", "claimedAt": "2026-12-01T00:00:00Z", "outcome": "claimed"}]}`, state.Version+1)
	writeStateRaw(t, ctx, s.ns, newer)
	_, before := s.rawState(t)
	for i := 0; i < 2; i++ {
		r := s.check("--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey)
		if r.code != 1 || !strings.Contains(r.stderr, fmt.Sprintf("version %d", state.Version+1)) || !strings.Contains(r.stderr, fmt.Sprintf("version %d", state.Version)) {
			t.Fatalf("exit %d, want 1 naming both versions\n%s", r.code, r.stderr)
		}
		waitPastWedgedFor()
	}
	data, after := s.rawState(t)
	if after != before || data != newer {
		t.Errorf("the newer document was touched (resourceVersion %s → %s):\n%s", before, after, data)
	}
	if !s.podExists(s.pod.Name) {
		t.Error("restarted without the state")
	}
	if got := eventNames(webhooks(t, rcv.since(0, webhookPath))); len(got) == 0 || got[0] != "watchdog-error" {
		t.Errorf("alerts %v, want watchdog-error", got)
	}
}

func (s *scenario) rawState(t *testing.T) (data, resourceVersion string) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cm, err := env.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	must(t, err)
	return cm.Data[statestore.DataKey], cm.ResourceVersion
}

// Two runs at once (the CronJob controller's Forbid is no guarantee: it ran two
// Jobs after an API-server restart) page once per problem, even when the receiver
// answers slowly: the run that loses the alert claim re-reads the winner's state,
// finds the problem paged, and sends nothing of its own. The claim's reservation
// leaves nothing in the outbox once the page is delivered.
func TestOverlappingRunsPageOnce(t *testing.T) {
	for round := 0; round < 2; round++ {
		rcv := newReceiver(t)
		rcv.setDelay(3 * time.Second)
		s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
		results := s.race(2, "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--alert-timeout", "10s")
		for _, r := range results {
			if r.code != 0 {
				t.Fatalf("round %d: a racing run failed: exit %d\n%s", round, r.code, r.stderr)
			}
		}
		var ids []string
		for _, n := range webhooks(t, rcv.since(0, webhookPath)) {
			if n.Event == "wedged" {
				ids = append(ids, n.ID)
			}
		}
		if len(ids) != 1 {
			t.Fatalf("round %d: %d wedged pages (ids %v), want 1", round, len(ids), ids)
		}
		st, _ := s.state()
		if a := st.Alerts["wedged"]; a == nil || a.LastSentAt == nil {
			t.Errorf("round %d: the wedged alert is not recorded as sent: %+v", round, a)
		}
		if len(st.Outbox) != 0 {
			t.Errorf("round %d: outbox %+v, want empty: the page was delivered", round, st.Outbox)
		}
	}
}

// A pass cut short by its own shutdown (SIGTERM from a helm upgrade or a node drain)
// writes what it can and sends nothing: no watchdog-error, no /fail ping.
func TestShutdownMidPassSendsNothing(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	s.check().expect(t, 0, "healthy", "none")
	s.metrics.SetPage(fixture(t, "scheduler-metrics-discovery-dead.txt"))
	s.syncCache()

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(1500*time.Millisecond, cancel) // mid-confirmation
	var stdout, stderr bytes.Buffer
	args := append(append([]string{"check"}, s.base...), "--confirm-window", "20s", "--sample-interval", "500ms", "--timeout", "60s",
		"--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--heartbeat-url", rcv.url(heartbeatPath))
	code := cli.ExecuteContext(ctx, args, &stdout, &stderr)
	if code == 0 || !strings.Contains(stderr.String(), check.ErrInterrupted.Error()) {
		t.Fatalf("exit %d, want a failure that says the pass was cut short\n%s", code, stderr.String())
	}
	time.Sleep(200 * time.Millisecond)
	if got := rcv.all(); len(got) != 0 {
		var paths []string
		for _, q := range got {
			paths = append(paths, q.Path)
		}
		t.Fatalf("a shutdown sent %v", paths)
	}
	if strings.Contains(stderr.String(), `"level":"error"`) {
		t.Errorf("a shutdown logged errors:\n%s", stderr.String())
	}
	st, _ := s.state()
	if st.LastRun == nil || st.LastRun.Outcome != "interrupted" {
		t.Fatalf("last run %+v, want outcome interrupted", st.LastRun)
	}
	if p := st.Pods[string(s.pod.UID)]; p == nil || p.Episode == nil {
		t.Errorf("the interrupted pass did not keep what it observed: %+v", p)
	}
}

// A restart that does not heal (the replacement wedges again soon after it starts:
// the cause is outside the scheduler) is not repeated every window: the next
// restart waits (--restart-backoff), restart-ineffective says why, and no
// restart-blocked is paged for it.
func TestIneffectiveRestartBacksOff(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	var mark int
	r := restartDoesNotHeal(t, s, func() { mark = rcv.count() }, "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey)
	if !strings.Contains(r.report.Reason, "did not heal; backing off") || !strings.Contains(r.report.Targets[0].Ineffective, "did not heal the scheduler: its replacement agentenv-scheduler-r1") {
		t.Fatalf("reason %q, ineffective %q", r.report.Reason, r.report.Targets[0].Ineffective)
	}
	got := eventNames(webhooks(t, rcv.since(mark, webhookPath)))
	if !slices.Contains(got, "restart-ineffective") || slices.Contains(got, "restart-blocked") {
		t.Errorf("alerts %v, want restart-ineffective and no restart-blocked", got)
	}
	if evs := s.events("agentenv-scheduler-r1", alert.Spec(alert.EventRestartIneffective).Reason); len(evs) != 1 {
		t.Errorf("%d WatchdogRestartIneffective Events on the replacement", len(evs))
	}
	if !s.podExists("agentenv-scheduler-r1") {
		t.Fatal("the replacement was restarted inside the back-off")
	}
	st, _ := s.state()
	if st.Backoff == nil || st.Backoff.Ineffective != 1 || st.Backoff.NotBefore.Sub(st.Backoff.LastRestartAt) != 30*time.Second {
		t.Fatalf("back-off %+v, want one ineffective restart and 30s", st.Backoff)
	}
	if rs := restartFor(st, string(s.pod.UID)); rs == nil || rs.Ineffective == "" {
		t.Errorf("the first restart is not marked as not healing: %+v", rs)
	}
}

// restartDoesNotHeal drives s (a wedged scheduler) through a restart whose
// replacement, agentenv-scheduler-r1, wedges the same way, up to the run that backs
// off instead of restarting it again (--restart-backoff 30s), and returns that run.
// beforeLast is called just before it.
func restartDoesNotHeal(t *testing.T, s *scenario, beforeLast func(), extra ...string) result {
	t.Helper()
	flags := append([]string{"--restart-backoff", "30s", "--restart-backoff-max", "1h"}, extra...)
	s.check(flags...).expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	s.check(flags...).expect(t, 0, "wedged", "restart")
	if s.podExists(s.pod.Name) {
		t.Fatal("the first restart did not happen")
	}
	// Its replacement starts and wedges the same way.
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := testenv.CreateSchedulerPod(ctx, env.Client, s.ns, testenv.PodSpec{Name: "agentenv-scheduler-r1", StartedAt: time.Now()})
	must(t, err)
	// Past --startup-grace 1s by the watchdog's clock, to which a clock behind sees the start ahead.
	time.Sleep(1100*time.Millisecond + max(-s.skew, 0))
	s.check(flags...).expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	beforeLast()
	r := s.check(flags...)
	r.expect(t, 0, "wedged", "blocked")
	return r
}

// A restart whose replacement was observed healthy healed the scheduler: when the
// replacement wedges later (a new flap, inside the 15 minutes that judge a
// restart), that is a new problem, restarted as usual, with no
// restart-ineffective and no back-off.
func TestHealedRestartIsNotIneffective(t *testing.T) {
	rcv := newReceiver(t)
	dead := fixture(t, "scheduler-metrics-discovery-dead.txt")
	s := newScenario(t, layout{serving: 3, page: dead})
	flags := []string{"--restart-backoff", "30s", "--restart-backoff-max", "1h", "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey}
	s.check(flags...).expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	s.check(flags...).expect(t, 0, "wedged", "restart")
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := testenv.CreateSchedulerPod(ctx, env.Client, s.ns, testenv.PodSpec{Name: "agentenv-scheduler-r1", StartedAt: time.Now()})
	must(t, err)
	time.Sleep(1100 * time.Millisecond) // past --startup-grace 1s
	s.metrics.SetPage(fixture(t, "scheduler-metrics-healthy.txt"))
	s.check(flags...).expect(t, 0, "healthy", "none")

	// A new flap kills the replacement's watch.
	s.metrics.SetPage(dead)
	s.check(flags...).expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	mark := rcv.count()
	r := s.check(flags...)
	r.expect(t, 0, "wedged", "restart")
	if got := eventNames(webhooks(t, rcv.since(mark, webhookPath))); slices.Contains(got, "restart-ineffective") {
		t.Errorf("alerts %v: a restart that healed was called ineffective", got)
	}
	st, _ := s.state()
	if st.Backoff != nil {
		t.Errorf("back-off %+v after a restart that healed", st.Backoff)
	}
	if rs := restartFor(st, string(s.pod.UID)); rs == nil || rs.HealedAt == nil || rs.Ineffective != "" {
		t.Errorf("the first restart is not recorded as healed: %+v", rs)
	}
}

// The nodes scaled to zero in the middle of a wedge: the
// EndpointSlice empties, the verdict is no-nodes, but that says nothing about
// discovery: no recovered, and when the nodes come back to a discovery still
// dead, the same episode goes on.
func TestNodesScaledToZeroMidWedgeIsNotRecovered(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	flags := []string{"--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--wedged-for", "1h"}
	s.check(flags...).expect(t, 0, "wedged", "wait")
	setNodes := func(n int) {
		t.Helper()
		ctx, cancel := testenv.Ctx()
		defer cancel()
		must(t, env.Client.DiscoveryV1().EndpointSlices(s.ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}))
		must(t, testenv.CreateNodeSlices(ctx, env.Client, s.ns, "agentenv-nodes", n, 100))
	}
	setNodes(0)
	s.check(flags...).expect(t, 0, "no-nodes", "none")
	setNodes(3)
	r := s.check(flags...)
	r.expect(t, 0, "wedged", "wait")
	if got := eventNames(webhooks(t, rcv.since(0, webhookPath))); slices.Contains(got, "recovered") {
		t.Errorf("alerts %v: the nodes going away is no recovery", got)
	}
	st, _ := s.state()
	if p := st.Pods[string(s.pod.UID)]; p == nil || p.Episode == nil || len(st.Episodes) != 0 {
		t.Errorf("the episode did not go on across the nodes' absence: %+v, ended %+v", p, st.Episodes)
	}
}
