package integration

import (
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/doctor"
)

// chartRules are what the chart's Role grants with its default values (restart
// method delete, restarts on, no leader Lease, judgePods deployment): role.yaml,
// rendered.
func chartRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"agentenv-scheduler-watchdog", "agentenv-scheduler-watchdog-evidence"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"agentenv-scheduler-watchdog-key"}, Verbs: []string{"get"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{"agentenv-scheduler-watchdog"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods/log"}, Verbs: []string{"get"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"agentenv-scheduler-watchdog-key"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"agentenv-scheduler"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
	}
}

// without returns rules with verb removed from the rules on resource.
func without(rules []rbacv1.PolicyRule, resource, verb string) []rbacv1.PolicyRule {
	var out []rbacv1.PolicyRule
	for _, r := range rules {
		r = *r.DeepCopy()
		if r.Resources[0] == resource {
			var verbs []string
			for _, v := range r.Verbs {
				if v != verb {
					verbs = append(verbs, v)
				}
			}
			if len(verbs) == 0 {
				continue
			}
			r.Verbs = verbs
		}
		out = append(out, r)
	}
	return out
}

// doctorRun is one `watchdog doctor -o json`.
type doctorRun struct {
	code   int
	report doctor.Report
	stdout string
	stderr string
}

func runDoctor(t *testing.T, args ...string) doctorRun {
	t.Helper()
	r := runCLI(t, append([]string{"doctor"}, args...)...)
	d := doctorRun{code: r.code, stdout: r.stdout, stderr: r.stderr}
	if err := json.Unmarshal([]byte(r.stdout), &d.report); err != nil {
		t.Fatalf("doctor stdout is not one JSON report: %v\n%s\nstderr:\n%s", err, r.stdout, r.stderr)
	}
	return d
}

// check returns the result whose name starts with prefix.
func (d doctorRun) check(t *testing.T, prefix string) doctor.Result {
	t.Helper()
	for _, c := range d.report.Checks {
		if strings.HasPrefix(c.Name, prefix) {
			return c
		}
	}
	t.Fatalf("no check %q in\n%s", prefix, d.stdout)
	return doctor.Result{}
}

// failed names the failed checks.
func (d doctorRun) failed() []string {
	var out []string
	for _, c := range d.report.Checks {
		if !c.OK {
			out = append(out, c.Name)
		}
	}
	return out
}

// expectOnly fails the test unless the run exited 1 with exactly the named checks
// failing, each with a hint.
func (d doctorRun) expectOnly(t *testing.T, names ...string) {
	t.Helper()
	got := d.failed()
	if d.code != 1 || strings.Join(got, "|") != strings.Join(names, "|") {
		t.Fatalf("exit %d, failed %q; want exit 1 and %q\n%s\nstderr:\n%s", d.code, got, names, d.stdout, d.stderr)
	}
	for _, c := range d.report.Checks {
		if !c.OK && c.Hint == "" {
			t.Errorf("%s failed without a hint", c.Name)
		}
	}
}

// doctorArgs are s's flags for doctor (check's flags: doctor takes them all).
// The scenarios' schedulers serve no gRPC: the probe's checks are probe_test.go's.
func (s *scenario) doctorArgs(args ...string) []string {
	return append(append(append([]string(nil), s.base...), "--discovery-probe", "off"), args...)
}

// createEmptyState creates the state ConfigMap as the chart does: no data.
func createEmptyState(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler-watchdog"}}, metav1.CreateOptions{})
	must(t, err)
}

// stateVersion is the state ConfigMap's resourceVersion.
func stateVersion(t *testing.T, ns string) string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	must(t, err)
	return cm.ResourceVersion
}

// restrictedDoctor returns doctor arguments for s as a ServiceAccount holding only
// rules, once the authorizer has the binding (it takes a moment): until then every
// review is denied, so wait for `can list pods` (granted in every test here).
func restrictedDoctor(t *testing.T, s *scenario, name string, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	args := append(restrictedCheck(t, s, name, rules)[1:], "--discovery-probe", "off")
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := runDoctor(t, args...)
		if r.check(t, "can list pods").OK || time.Now().After(deadline) {
			return args
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestDoctorAllPass: the chart's own rights, a healthy scheduler, everything in
// place: every check passes, and doctor changed nothing.
func TestDoctorAllPass(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	createEmptyState(t, s.ns)
	args := restrictedDoctor(t, s, "chart-rights", chartRules())
	s.syncCache()
	rvBefore := stateVersion(t, s.ns)

	d := runDoctor(t, args...)
	if d.code != 0 || !d.report.OK || d.report.Failed != 0 {
		t.Fatalf("exit %d failed %q\n%s\nstderr:\n%s", d.code, d.failed(), d.stdout, d.stderr)
	}
	for _, name := range []string{
		"can list pods", "can delete pods", "can list endpointslices.discovery.k8s.io",
		"can get configmaps/agentenv-scheduler-watchdog", "can update configmaps/agentenv-scheduler-watchdog",
		"can create events", "can get deployments.apps/agentenv-scheduler",
	} {
		if c := d.check(t, name); !c.OK || c.Skipped {
			t.Errorf("%s: %+v", name, c)
		}
	}
	if c := d.check(t, "nodes Service"); !strings.Contains(c.Detail, "3 serving node(s)") {
		t.Errorf("EndpointSlices: %s", c.Detail)
	}
	if c := d.check(t, "metrics of pod agentenv-scheduler-abc12"); !strings.Contains(c.Detail, "ready=3") {
		t.Errorf("metrics: %s", c.Detail)
	}
	if c := d.check(t, "state ConfigMap can be written"); !strings.Contains(c.Detail, "dry run") {
		t.Errorf("state write: %s", c.Detail)
	}
	// Not applicable here: shown as skipped, not failed.
	for _, name := range []string{"scheduler leader Lease", "election Lease", "alert sinks"} {
		if c := d.check(t, name); !c.Skipped {
			t.Errorf("%s not skipped: %+v", name, c)
		}
	}
	if rv := stateVersion(t, s.ns); rv != rvBefore {
		t.Errorf("doctor wrote the state ConfigMap: resourceVersion %s → %s", rvBefore, rv)
	}
	ctx, cancel := testenv.Ctx()
	defer cancel()
	evs, err := env.Client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(evs.Items) != 0 {
		t.Errorf("doctor left %d Events", len(evs.Items))
	}

	// The text form: a line per check, and the summary.
	text := runCLI(t, append(append([]string{"doctor"}, args...), "--output", "text")...)
	if text.code != 0 || !strings.Contains(text.stdout, "✓ can delete pods") || !strings.Contains(text.stdout, "✓ all ") {
		t.Errorf("text report, exit %d:\n%s", text.code, text.stdout)
	}
}

// TestDoctorMissingRBAC: each right the configuration needs and the identity lacks
// is its own ✗, by name where the Role narrows it.
func TestDoctorMissingRBAC(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	createEmptyState(t, s.ns)

	t.Run("delete pods", func(t *testing.T) {
		args := restrictedDoctor(t, s, "no-delete", without(chartRules(), "pods", "delete"))
		d := runDoctor(t, args...)
		d.expectOnly(t, "can delete pods")
		c := d.check(t, "can delete pods")
		if !strings.Contains(c.Hint, "verbs: [delete]") || !strings.Contains(c.Detail, "--restart-method delete") {
			t.Errorf("hint %q detail %q", c.Hint, c.Detail)
		}
		// Alert-only (no restarts) needs no delete at all.
		if d := runDoctor(t, append(args, "--max-restarts", "0")...); d.code != 0 {
			t.Errorf("--max-restarts 0: exit %d, failed %q", d.code, d.failed())
		}
	})

	t.Run("patch deployment by name", func(t *testing.T) {
		// rollout: patch on the scheduler Deployment, by name; a grant for another
		// name does not count.
		rules := append(without(chartRules(), "pods", "delete"), rbacv1.PolicyRule{
			APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"someone-else"}, Verbs: []string{"patch"},
		})
		args := restrictedDoctor(t, s, "no-patch", rules)
		d := runDoctor(t, append(args, "--restart-method", "rollout")...)
		d.expectOnly(t, "can patch deployments.apps/agentenv-scheduler")
		if c := d.check(t, "can patch"); !strings.Contains(c.Hint, "resourceNames: [agentenv-scheduler]") {
			t.Errorf("hint %q", c.Hint)
		}
	})

	t.Run("update state", func(t *testing.T) {
		// The review and the dry-run write both fail (and the evidence's review:
		// without() takes update off every configmaps rule).
		args := restrictedDoctor(t, s, "read-only", without(chartRules(), "configmaps", "update"))
		d := runDoctor(t, args...)
		d.expectOnly(t, "can update configmaps/agentenv-scheduler-watchdog", "can update configmaps/agentenv-scheduler-watchdog-evidence", "state ConfigMap can be written")
		if c := d.check(t, "state ConfigMap can be written"); !strings.Contains(c.Detail, "forbidden") {
			t.Errorf("state write detail %q", c.Detail)
		}
	})

	t.Run("get replicasets", func(t *testing.T) {
		// A Role of one's own from before --judge-pods deployment (the CHANGELOG's
		// upgrade note): the permission is a ✗, and the judged-pods check says the
		// read was refused, not that --deployment is wrong.
		args := restrictedDoctor(t, s, "no-replicasets", without(chartRules(), "replicasets", "get"))
		d := runDoctor(t, args...)
		d.expectOnly(t, "can get replicasets.apps", "scheduler pods a run judges")
		c := d.check(t, "scheduler pods a run judges")
		if !strings.Contains(c.Detail, "forbidden") || !strings.Contains(c.Hint, "get replicasets") || strings.Contains(c.Hint, "set --deployment") {
			t.Errorf("judged pods with ReplicaSets refused: detail %q hint %q", c.Detail, c.Hint)
		}
		// --judge-pods selector with the delete method reads no ReplicaSet.
		if d := runDoctor(t, append(args, "--judge-pods", "selector")...); d.code != 0 {
			t.Errorf("--judge-pods selector: exit %d, failed %q", d.code, d.failed())
		}
	})

	t.Run("leader lease", func(t *testing.T) {
		args := restrictedDoctor(t, s, "no-lease", chartRules())
		d := runDoctor(t, append(args, "--leader-lease", "agentenv-scheduler-leader")...)
		// Not granted, so not readable either.
		d.expectOnly(t, "can get leases.coordination.k8s.io/agentenv-scheduler-leader", "scheduler leader Lease exists")
	})
}

// TestDoctorMisconfigured: each setting that points at nothing is a ✗ that names it.
func TestDoctorMisconfigured(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	createEmptyState(t, s.ns)
	s.syncCache()
	if d := runDoctor(t, s.doctorArgs()...); d.code != 0 {
		t.Fatalf("the baseline fails: %q\n%s", d.failed(), d.stdout)
	}

	t.Run("wrong selector", func(t *testing.T) {
		d := runDoctor(t, s.doctorArgs("--scheduler-selector", "app.kubernetes.io/name=agentenv-schedule")...)
		d.expectOnly(t, "scheduler pods match --scheduler-selector")
		if c := d.check(t, "scheduler pods match"); !strings.Contains(c.Hint, "--scheduler-selector") {
			t.Errorf("hint %q", c.Hint)
		}
		if c := d.check(t, "scheduler metrics answer"); !c.Skipped {
			t.Errorf("metrics with no pods: %+v", c)
		}
	})

	t.Run("wrong container", func(t *testing.T) {
		runDoctor(t, s.doctorArgs("--scheduler-container", "sched")...).expectOnly(t, "scheduler pods have the --scheduler-container")
	})

	t.Run("wrong service", func(t *testing.T) {
		d := runDoctor(t, s.doctorArgs("--nodes-service", "agentenv-node")...)
		d.expectOnly(t, "nodes Service has EndpointSlices with --nodes-port")
		if c := d.check(t, "nodes Service"); !strings.Contains(c.Detail, "no EndpointSlice") || !strings.Contains(c.Hint, "--nodes-service") {
			t.Errorf("%+v", c)
		}
	})

	t.Run("wrong port", func(t *testing.T) {
		d := runDoctor(t, s.doctorArgs("--nodes-port", "8001")...)
		d.expectOnly(t, "nodes Service has EndpointSlices with --nodes-port")
		if c := d.check(t, "nodes Service"); !strings.Contains(c.Detail, "none with port 8001 (ports: 8000)") || !strings.Contains(c.Hint, "--nodes-port") {
			t.Errorf("%+v", c)
		}
	})

	t.Run("wrong deployment", func(t *testing.T) {
		// No pod is judged either (--judge-pods deployment, the default).
		runDoctor(t, s.doctorArgs("--deployment", "agentenv-sched")...).expectOnly(t, "scheduler pods a run judges", "scheduler Deployment exists")
		runDoctor(t, s.doctorArgs("--deployment", "agentenv-sched", "--judge-pods", "selector")...).expectOnly(t, "scheduler Deployment exists")
	})

	t.Run("missing leader lease", func(t *testing.T) {
		runDoctor(t, s.doctorArgs("--leader-lease", "nobody-holds-this")...).expectOnly(t, "scheduler leader Lease exists")
	})

	t.Run("election lease not created yet", func(t *testing.T) {
		// `run --leader-elect` creates its Lease: fine, if it may create Leases.
		d := runDoctor(t, s.doctorArgs("--leader-elect", "--leader-elect-lease", "wd-election")...)
		if d.code != 0 || !strings.Contains(d.check(t, "election Lease").Detail, "does not exist yet") || !d.check(t, "can create leases").OK {
			t.Errorf("exit %d failed %q\n%s", d.code, d.failed(), d.stdout)
		}
	})
}

// TestDoctorMetrics: metrics down, or not the scheduler's, are ✗ per pod.
func TestDoctorMetrics(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	createEmptyState(t, s.ns)
	s.syncCache()
	const name = "metrics of pod agentenv-scheduler-abc12"

	s.metrics.SetHandler(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	d := runDoctor(t, s.doctorArgs()...)
	d.expectOnly(t, name)
	if c := d.check(t, name); !strings.Contains(c.Detail, "503") || !strings.Contains(c.Hint, "--metrics-path") {
		t.Errorf("%+v", c)
	}

	// Up, but without the families the watchdog reads.
	s.metrics.SetPage("# TYPE go_goroutines gauge\ngo_goroutines 42\n")
	d = runDoctor(t, s.doctorArgs()...)
	d.expectOnly(t, name)
	if c := d.check(t, name); !strings.Contains(c.Detail, "absent") || !strings.Contains(c.Hint, "agentenv_scheduler_observed_nodes") {
		t.Errorf("%+v", c)
	}

	// Nothing listening on the port.
	s.metrics.Close()
	d = runDoctor(t, s.doctorArgs()...)
	d.expectOnly(t, name)
	if c := d.check(t, name); !strings.Contains(c.Detail, "unreachable") || !strings.Contains(c.Hint, "--metrics-port") {
		t.Errorf("%+v", c)
	}
}

// TestDoctorStateAndSinks: a missing state ConfigMap is fine when it may be
// created (and a dry run creates nothing); an existing state is not touched;
// --send-test delivers the test alert and reports a refusing sink.
func TestDoctorStateAndSinks(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	s.syncCache()
	d := runDoctor(t, s.doctorArgs()...)
	if d.code != 0 {
		t.Fatalf("exit %d failed %q\n%s", d.code, d.failed(), d.stdout)
	}
	if c := d.check(t, "state ConfigMap can be written"); !strings.Contains(c.Detail, "creating") {
		t.Errorf("missing ConfigMap: %+v", c)
	}
	if c := d.check(t, "can create configmaps"); !c.OK {
		t.Errorf("create is needed while the ConfigMap is missing: %+v", c)
	}
	if st, _ := s.state(); st != nil {
		t.Fatal("the dry run created the state ConfigMap")
	}

	// A real state, written by a run: doctor reads it and leaves it as it was.
	s.check().expect(t, 0, "healthy", "none")
	before, rv := s.state()
	d = runDoctor(t, s.doctorArgs()...)
	if c := d.check(t, "state ConfigMap can be read"); !c.OK || !strings.Contains(c.Detail, "last written") {
		t.Errorf("%+v", c)
	}
	after, rvAfter := s.state()
	if rvAfter != rv || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("doctor changed the state: resourceVersion %s → %s", rv, rvAfter)
	}
	if c := d.check(t, "alert sinks"); !c.Skipped {
		t.Errorf("no sink configured, yet %+v", c)
	}

	// Sinks: without --send-test reached (a connection, nothing sent), delivered with it.
	rcv := newReceiver(t)
	sinks := []string{"--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--heartbeat-url", rcv.url(heartbeatPath), "--alert-timeout", "2s", "--outbox-key", outboxKey}
	d = runDoctor(t, s.doctorArgs(sinks...)...)
	if c := d.check(t, "webhook accepts a test alert"); !c.Skipped || rcv.count() != 0 {
		t.Errorf("without --send-test: %+v, %d requests", c, rcv.count())
	}
	for _, name := range []string{"webhook is reachable", "heartbeat is reachable"} {
		if c := d.check(t, name); !c.OK || c.Skipped {
			t.Errorf("%s: %+v", name, c)
		}
	}
	// A sink whose path is blocked (here: nothing listens) fails the preflight, as
	// a NetworkPolicy that drops it would: without --send-test, nothing is sent.
	blocked := runDoctor(t, s.doctorArgs("--webhook-url", "http://"+freeAddr(t)+webhookPath, "--alert-timeout", "2s", "--outbox-key", outboxKey)...)
	blocked.expectOnly(t, "webhook is reachable")
	if c := blocked.check(t, "webhook is reachable"); !strings.Contains(c.Hint, "networkPolicy") {
		t.Errorf("%+v", c)
	}
	// An https receiver whose certificate the watchdog does not trust: the port is
	// open, yet every send would fail the handshake, so the preflight fails too, for
	// each kind of sink, and nothing reaches the receiver.
	var tlsHits atomic.Int32
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { tlsHits.Add(1) }))
	defer untrusted.Close()
	untrusted.Config.ErrorLog = log.New(io.Discard, "", 0)
	for _, c := range []struct{ check, flag, url string }{
		{"webhook is reachable", "--webhook-url", untrusted.URL + webhookPath},
		{"slack is reachable", "--slack-webhook-url", untrusted.URL + "/services/T0/B0/x"},
		{"alertmanager is reachable", "--alertmanager-url", untrusted.URL},
	} {
		d := runDoctor(t, s.doctorArgs(c.flag, c.url, "--alert-timeout", "2s", "--outbox-key", outboxKey)...)
		d.expectOnly(t, c.check)
		if r := d.check(t, c.check); !strings.Contains(r.Detail, "certificate") || !strings.Contains(r.Hint, "CA") {
			t.Errorf("%s with an untrusted certificate: %+v", c.flag, r)
		}
	}
	if n := tlsHits.Load(); n != 0 {
		t.Errorf("doctor sent %d request(s) to the untrusted receiver", n)
	}
	// Sinks without --outbox-key: what a refused alert leaves in the state for retry
	// could not be told from what a ConfigMap editor writes there.
	unkeyed := runDoctor(t, s.doctorArgs("--webhook-url", rcv.url(webhookPath), "--alert-timeout", "2s", "--key-secret", "")...)
	unkeyed.expectOnly(t, "alerts kept for retry are authenticated")
	if c := unkeyed.check(t, "alerts kept for retry are authenticated"); !strings.Contains(c.Hint, "outbox-key") {
		t.Errorf("%+v", c)
	}
	d = runDoctor(t, s.doctorArgs(append(sinks, "--send-test")...)...)
	if d.code != 0 || !d.check(t, "webhook accepts").OK || !d.check(t, "heartbeat accepts").OK {
		t.Fatalf("exit %d failed %q", d.code, d.failed())
	}
	notes := webhooks(t, rcv.since(0, webhookPath))
	if len(notes) != 1 || !notes[0].Test || notes[0].Event != "test" {
		t.Errorf("test deliveries %+v", notes)
	}
	if pings := rcv.since(0, heartbeatPath); len(pings) != 1 {
		t.Errorf("%d heartbeat pings", len(pings))
	}
	rcv.setStatus(webhookPath, http.StatusForbidden)
	failed := runDoctor(t, s.doctorArgs(append(sinks, "--send-test")...)...)
	failed.expectOnly(t, "webhook accepts a test alert")
	for _, out := range []string{d.stdout, d.stderr, failed.stdout, failed.stderr, blocked.stdout, blocked.stderr, unkeyed.stdout, unkeyed.stderr} {
		for _, m := range secretMarkers {
			if strings.Contains(out, m) {
				t.Errorf("doctor printed the secret part %q:\n%s", m, out)
			}
		}
	}
}

// TestDoctorNewerState: a state document written by a newer watchdog is one no
// run will use or overwrite: a ✗ saying to run the newer watchdog.
func TestDoctorNewerState(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := env.Client.CoreV1().ConfigMaps(s.ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler-watchdog"},
		Data:       map[string]string{"state.json": `{"version": 999}`},
	}, metav1.CreateOptions{})
	must(t, err)
	s.syncCache()
	d := runDoctor(t, s.doctorArgs()...)
	d.expectOnly(t, "state ConfigMap can be read")
	if c := d.check(t, "state ConfigMap can be read"); !strings.Contains(c.Detail, "newer watchdog") {
		t.Errorf("%+v", c)
	}
	if c := d.check(t, "state ConfigMap can be written"); !c.Skipped {
		t.Errorf("%+v", c)
	}
}

// TestDoctorJudgedPods: doctor says which pods a run judges,
// as a run selects them. A canary of another Deployment with the scheduler's
// labels is listed as not judged, and all pass; judging every pod (--judge-pods
// selector) that is two pods without --leader-lease: a warning (exit 0), since
// the single-target gate would block every restart; so are two replicas of the
// Deployment itself. No Deployment: nothing is judged, a failure.
func TestDoctorJudgedPods(t *testing.T) {
	const name = "scheduler pods a run judges"
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	createEmptyState(t, s.ns)
	canary := s.addCanary()

	d := runDoctor(t, s.doctorArgs()...)
	if c := d.check(t, name); !c.OK || c.Warning || !strings.Contains(c.Detail, "judged: "+s.pod.Name+"; not judged: "+canary.Name+" (not a pod of Deployment agentenv-scheduler") {
		t.Errorf("by default: %+v", c)
	}
	if d.code != 0 {
		t.Errorf("exit %d, failed %q", d.code, d.failed())
	}

	all := runDoctor(t, s.doctorArgs("--judge-pods", "selector")...)
	if c := all.check(t, name); !c.OK || !c.Warning || !strings.Contains(c.Detail, "2 pods are judged and --leader-lease is not set") || !strings.Contains(c.Hint, "--leader-lease") {
		t.Errorf("judging every pod: %+v", c)
	}
	if all.code != 0 || all.report.Warnings != 1 {
		t.Errorf("a warning must not fail doctor: exit %d, %d warnings", all.code, all.report.Warnings)
	}

	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := testenv.CreateSchedulerPod(ctx, env.Client, s.ns, testenv.PodSpec{Name: "agentenv-scheduler-7d9c4-r3pl1"})
	must(t, err)
	if c := runDoctor(t, s.doctorArgs()...).check(t, name); !c.Warning || !strings.Contains(c.Detail, "2 pods are judged") {
		t.Errorf("two replicas of the Deployment: %+v", c)
	}

	none := runDoctor(t, s.doctorArgs("--deployment", "agentenv-sched")...)
	if c := none.check(t, name); c.OK || !strings.Contains(c.Detail, "Deployment agentenv-sched not found") || !strings.Contains(c.Hint, "--judge-pods selector") {
		t.Errorf("no such Deployment: %+v", c)
	}
}
