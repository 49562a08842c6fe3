package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/cli"
)

// instance is a `watchdog run` running in this process.
type instance struct {
	addr     string
	cancel   context.CancelFunc
	done     chan int
	stderr   *lockedBuffer
	stopOnce sync.Once
	exit     int
}

func startRun(t *testing.T, args ...string) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{cancel: cancel, done: make(chan int, 1), stderr: &lockedBuffer{}}
	// Port 0: the instance picks a free port and logs it.
	args = append(append([]string{"run"}, args...), "--metrics-addr", "127.0.0.1:0")
	go func() {
		var stdout bytes.Buffer
		in.done <- cli.ExecuteContext(ctx, args, &stdout, in.stderr)
	}()
	t.Cleanup(func() { in.stop() })
	addr := regexp.MustCompile(`"metricsAddr":"(127\.0\.0\.1:\d+)"`)
	waitFor(t, 10*time.Second, "the instance to listen", func() bool {
		m := addr.FindStringSubmatch(in.stderr.String())
		if m != nil {
			in.addr = m[1]
		}
		return m != nil
	})
	return in
}

// stop cancels the instance (as SIGTERM does) and returns its exit code, or -1
// if it did not stop within 20 s.
func (in *instance) stop() int {
	in.stopOnce.Do(func() {
		in.cancel()
		select {
		case in.exit = <-in.done:
		case <-time.After(20 * time.Second):
			in.exit = -1
		}
	})
	return in.exit
}

func (in *instance) get(path string) (int, string) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + in.addr + path)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runFlags are the base flags without --output (run prints no report).
func (s *scenario) runFlags() []string {
	return removeFlag(append([]string(nil), s.base...), "--output")
}

func TestRunModeMetricsAndHealth(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	// A ServiceAccount with just enough rights, so that revoking them makes every
	// pass fail: /healthz must notice.
	binding := grantWatchdog(t, s.ns, "runner")
	token := serviceAccountToken(t, s.ns, "runner")
	kubeconfig, err := env.WriteKubeconfig("runner-"+s.ns, token)
	must(t, err)
	flags := s.runFlags()
	flags[1] = kubeconfig
	in := startRun(t, append(flags, "--interval", "1s", "--timeout", "2s")...)

	waitFor(t, 15*time.Second, "a healthy /healthz", func() bool {
		code, _ := in.get("/healthz")
		return code == http.StatusOK
	})
	waitFor(t, 15*time.Second, "verdict metrics", func() bool {
		_, body := in.get("/metrics")
		return strings.Contains(body, `agentenv_watchdog_pod_verdict{pod="`+s.pod.Name+`",verdict="healthy"} 1`)
	})
	_, body := in.get("/metrics")
	for _, want := range []string{
		"agentenv_watchdog_last_successful_pass_timestamp_seconds ",
		`agentenv_watchdog_passes_total{result="ok"}`,
		"agentenv_watchdog_pass_duration_seconds_bucket",
		"\nagentenv_watchdog_leader 1\n",
		`agentenv_watchdog_last_pass_verdict{verdict="healthy"} 1`,
		`agentenv_watchdog_last_pass_action{action="none"} 1`,
		// Who is running: the build, and the Go and process collectors.
		`agentenv_watchdog_build_info{commit="`,
		"\ngo_goroutines ",
		"\nprocess_start_time_seconds ",
		// Every counter is there at 0 before its first event.
		`agentenv_watchdog_restarts_total{outcome="done"} 0`,
		`agentenv_watchdog_restarts_total{outcome="failed"} 0`,
		`agentenv_watchdog_passes_total{result="error"} 0`,
		`agentenv_watchdog_scrape_errors_total{kind="timeout"} 0`,
		`agentenv_watchdog_alerts_total{event="restart-ineffective",result="failed",sink="kubernetes-event"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Scrape errors are counted by kind.
	s.metrics.SetHandler(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	waitFor(t, 15*time.Second, "a scrape error metric", func() bool {
		_, body := in.get("/metrics")
		return strings.Contains(body, `agentenv_watchdog_scrape_errors_total{kind="http-status"}`)
	})

	// Revoke the rights: passes fail, and /healthz fails once no pass has
	// completed for two intervals plus the timeout (4 s here).
	ctx, cancel := testenv.Ctx()
	defer cancel()
	must(t, env.Client.RbacV1().RoleBindings(s.ns).Delete(ctx, binding, metav1.DeleteOptions{}))
	start := time.Now()
	waitFor(t, 30*time.Second, "/healthz to fail", func() bool {
		code, _ := in.get("/healthz")
		return code == http.StatusServiceUnavailable
	})
	code, msg := in.get("/healthz")
	t.Logf("/healthz %d after %s: %s", code, time.Since(start).Round(100*time.Millisecond), msg)
	if !strings.Contains(msg, "no pass completed") || !strings.Contains(msg, "forbidden") {
		t.Errorf("/healthz body should say why: %q", msg)
	}
	_, body = in.get("/metrics")
	if !strings.Contains(body, `agentenv_watchdog_passes_total{result="error"}`) {
		t.Error("failed passes are not counted")
	}

	// SIGTERM (context cancel) stops it cleanly with exit 0.
	if code := in.stop(); code != 0 {
		t.Errorf("exit %d after shutdown (-1: did not stop)", code)
	}
}

// grantWatchdog gives a ServiceAccount the rights `watchdog check` needs with the
// delete method and returns the RoleBinding's name.
func grantWatchdog(t *testing.T, ns, sa string) string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "watchdog-" + sa, Namespace: ns},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"agentenv-scheduler-watchdog-key"}, Verbs: []string{"get"}},
			{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: []string{"get"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
		},
	}
	_, err := env.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{})
	must(t, err)
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "watchdog-" + sa, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}
	_, err = env.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{})
	must(t, err)
	return rb.Name
}

func TestLeaderElectionTwoInstances(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	flags := append(s.runFlags(), "--interval", "1s", "--leader-elect")
	a := startRun(t, append(flags, "--leader-elect-identity", "watchdog-a")...)
	b := startRun(t, append(flags, "--leader-elect-identity", "watchdog-b")...)

	leading := func(in *instance) bool {
		_, body := in.get("/metrics")
		return grepMetric(body) == "agentenv_watchdog_leader 1"
	}
	waitFor(t, 20*time.Second, "a leader", func() bool { return leading(a) || leading(b) })
	time.Sleep(3 * time.Second) // several retry periods: the standby must stay one
	if leading(a) == leading(b) {
		_, ma := a.get("/metrics")
		_, mb := b.get("/metrics")
		t.Fatalf("exactly one instance must lead: a=%v b=%v\na (%s): %s\nb (%s): %s", leading(a), leading(b), a.addr, grepMetric(ma), b.addr, grepMetric(mb))
	}
	leader, standby := a, b
	if leading(b) {
		leader, standby = b, a
	}
	if code, msg := standby.get("/healthz"); code != http.StatusOK || !strings.Contains(msg, "standby") {
		t.Errorf("standby /healthz %d %q", code, msg)
	}

	// Only the leader runs passes: the state says who ran last, and the standby's
	// pass counter stays at zero.
	_, body := standby.get("/metrics")
	// (Its counters are there, at 0, from the start.)
	if regexp.MustCompile(`(?m)^agentenv_watchdog_passes_total\{[^}]*\} [1-9]`).MatchString(body) {
		t.Error("the standby ran passes")
	}

	// The leader shuts down and releases the Lease: the standby takes over
	// without waiting for the 15 s lease to expire.
	stopped := time.Now()
	leader.stop()
	waitFor(t, 10*time.Second, "the standby to take over", func() bool { return leading(standby) })
	t.Logf("takeover %s after the leader stopped", time.Since(stopped).Round(100*time.Millisecond))
	ctx, cancel := testenv.Ctx()
	defer cancel()
	lease, err := env.Client.CoordinationV1().Leases(s.ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	must(t, err)
	if lease.Spec.LeaseTransitions == nil || *lease.Spec.LeaseTransitions < 1 {
		t.Errorf("lease transitions %v", lease.Spec.LeaseTransitions)
	}
}

func grepMetric(body string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "agentenv_watchdog_leader") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}

// passesOK reads the instance's count of successful passes (-1: unreadable).
func (in *instance) passesOK() int {
	_, body := in.get("/metrics")
	m := regexp.MustCompile(`agentenv_watchdog_passes_total\{result="ok"\} (\d+)`).FindStringSubmatch(body)
	if m == nil {
		return -1
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return n
}

// On a real API server: a change of the nodes' EndpointSlices starts a pass
// long before --interval (at half of it, the earliest an early pass may come
// after the last), and without the right to watch them the watchdog warns and
// keeps passing on the plain interval.
func TestRunModeEndpointSliceChangeStartsAnEarlyPass(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	const interval = 20 * time.Second
	in := startRun(t, append(s.runFlags(), "--interval", interval.String())...)
	waitFor(t, 15*time.Second, "the watch to start", func() bool {
		return strings.Contains(in.stderr.String(), "watching the nodes' EndpointSlices: a change starts an early pass")
	})
	waitFor(t, 15*time.Second, "the first pass", func() bool { return in.passesOK() == 1 })
	first := time.Now()

	ctx, cancel := testenv.Ctx()
	defer cancel()
	slice, err := env.Client.DiscoveryV1().EndpointSlices(s.ns).Get(ctx, "agentenv-nodes-0", metav1.GetOptions{})
	must(t, err)
	slice.Endpoints[0].TargetRef.Name = "node-rolled" // a node replaced by a new one
	_, err = env.Client.DiscoveryV1().EndpointSlices(s.ns).Update(ctx, slice, metav1.UpdateOptions{})
	must(t, err)
	waitFor(t, interval, "a pass after the EndpointSlice change", func() bool { return in.passesOK() >= 2 })
	if took := time.Since(first); took >= interval*3/4 {
		t.Errorf("the pass after the change came %s after the first, want well before --interval %s", took.Round(time.Millisecond), interval)
	}
	if !strings.Contains(in.stderr.String(), "the nodes' EndpointSlices changed: early pass") {
		t.Errorf("the early pass is not logged:\n%s", in.stderr.String())
	}
	if code := in.stop(); code != 0 {
		t.Errorf("exit %d after shutdown (-1: did not stop)", code)
	}

	// A ServiceAccount that may list but not watch EndpointSlices.
	grantWatchdog(t, s.ns, "nowatch")
	kubeconfig, err := env.WriteKubeconfig("nowatch-"+s.ns, serviceAccountToken(t, s.ns, "nowatch"))
	must(t, err)
	flags := s.runFlags()
	flags[1] = kubeconfig
	limited := startRun(t, append(flags, "--interval", "1s")...)
	waitFor(t, 15*time.Second, "the warning and passes on the interval", func() bool {
		return strings.Contains(limited.stderr.String(), "cannot watch the nodes' EndpointSlices: passes run on the plain --interval") && limited.passesOK() >= 3
	})
	if code, body := limited.get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d without the watch: %s", code, body)
	}
	if n := strings.Count(limited.stderr.String(), "cannot watch the nodes' EndpointSlices"); n != 1 {
		t.Errorf("%d warnings for one lasting refusal, want 1", n)
	}
}
