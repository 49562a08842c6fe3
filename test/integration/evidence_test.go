package integration

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/statetext"
)

func startKubelet(t *testing.T, log string) *testenv.Kubelet {
	k := testenv.StartKubelet(log)
	t.Cleanup(k.Close)
	return k
}

// onNode registers a Node whose kubelet endpoint is k and binds pod to it.
func onNode(t *testing.T, s *scenario, k *testenv.Kubelet, pod string) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cleanup, err := k.RegisterNode(ctx, env.Client, "node-"+s.ns, s.ns, pod)
	if cleanup != nil {
		t.Cleanup(cleanup)
	}
	must(t, err)
}

func (s *scenario) bundles(t *testing.T) []evidence.Bundle {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cm, err := env.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, "agentenv-scheduler-watchdog-evidence", metav1.GetOptions{})
	must(t, err)
	if cm.Labels["app.kubernetes.io/component"] != evidence.Component {
		t.Errorf("evidence ConfigMap labels %v", cm.Labels)
	}
	var out []evidence.Bundle
	for k, v := range cm.Data {
		b, err := evidence.Open(nil, s.ns, k, []byte(v))
		if err != nil {
			t.Fatalf("bundle %s: %v", k, err)
		}
		out = append(out, b)
	}
	return out
}

// TestEvidenceBeforeRestart: just before the restart, the run saves the scheduler's
// last log lines, read through the real API server's pods/log (proxied to the
// stand-in kubelet of the pod's Node, with the bounds the watchdog asks for), the
// samples and gates it judged, the serving endpoints it counted and the pod's
// status, in the evidence ConfigMap; the restart record and the restarted alert
// name the bundle. A kubelet that never answers costs a bounded wait and a
// warning, never the restart.
func TestEvidenceBeforeRestart(t *testing.T) {
	var log strings.Builder
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&log, "2026-12-01T10:%02d:00Z line %d: endpointslice watch closed; not re-established\n", i%60, i)
	}
	k := startKubelet(t, log.String())
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	onNode(t, s, k, s.pod.Name)
	flags := []string{"--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey}
	s.check(flags...).expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	r := s.check(flags...)
	r.expect(t, 0, "wedged", "restart")

	calls := k.Requests()
	if len(calls) != 1 || calls[0].Path != "/containerLogs/"+s.ns+"/"+s.pod.Name+"/scheduler" ||
		calls[0].Query().Get("tailLines") != "200" || calls[0].Query().Get("limitBytes") != strconv.Itoa(evidence.MaxLogRead) {
		t.Fatalf("the kubelet was asked %v, want one bounded read of the scheduler container's log", calls)
	}
	bs := s.bundles(t)
	if len(bs) != 1 {
		t.Fatalf("%d bundles, want 1", len(bs))
	}
	b := bs[0]
	if b.Pod != s.pod.Name || b.UID != string(s.pod.UID) || b.Action != "restart" || b.Verdict != "wedged" || b.LogError != "" ||
		!strings.HasPrefix(b.Log, "2026-12-01T10:01:00Z line 301:") || !strings.Contains(b.Log, "line 500: endpointslice watch closed") ||
		strings.Count(b.Log, "\n") != 200 || b.Sample == nil || b.Sample.Ready() != 0 || b.Sample.HeartbeatRejected == 0 ||
		b.Endpoints == nil || b.Endpoints.Serving != 3 || len(b.Gates) == 0 || !b.Status.Running || b.Status.Phase != "Running" {
		t.Errorf("bundle %+v", b)
	}
	if len(r.report.Restarts) != 1 || r.report.Restarts[0].Evidence != b.Key {
		t.Errorf("the report's restart %+v does not name bundle %s", r.report.Restarts, b.Key)
	}
	st, _ := s.state()
	if rec := restartFor(st, string(s.pod.UID)); rec == nil || rec.Bundle != b.Key || !strings.Contains(rec.Gates, "wedged 2s ≥ 2s") {
		t.Errorf("restart record %+v, want bundle %s and the gates", rec, b.Key)
	}
	var restarted string
	for _, n := range webhooks(t, rcv.all()) {
		if n.Event == "restarted" {
			restarted = n.Reason
		}
	}
	if !strings.Contains(restarted, "watchdog history -n "+s.ns+" --evidence "+b.Key) {
		t.Errorf("the restarted alert does not say how to read the evidence: %q", restarted)
	}
	leakCheck(t, s, r)

	// watchdog history: the restart with its reason, evidence, gates and bundle,
	// the wedge's episode, and the Events still kept, newest first.
	base := []string{"--kubeconfig", env.Kubeconfig, "--namespace", s.ns}
	h := runCLI(t, append([]string{"history", "-o", "json"}, base...)...)
	var hist statetext.History
	if h.code != 0 || json.Unmarshal([]byte(h.stdout), &hist) != nil {
		t.Fatalf("history: exit %d\n%s%s", h.code, h.stdout, h.stderr)
	}
	kinds := map[string]int{}
	for i, e := range hist.Entries {
		kinds[e.Kind]++
		if i > 0 && e.At.After(hist.Entries[i-1].At) {
			t.Errorf("history not newest first at %d: %v after %v", i, e.At, hist.Entries[i-1].At)
		}
		if e.Kind == "restart" && (e.Bundle != b.Key || e.Gates == "" || !strings.Contains(e.Reason, "ready 0") || e.Outcome != "done" || e.Evidence == "") {
			t.Errorf("history's restart %+v", e)
		}
	}
	if kinds["restart"] != 1 || kinds["event"] < 2 || kinds["alert"] < 1 || len(hist.Notes) != 0 {
		t.Errorf("history kinds %v, notes %v", kinds, hist.Notes)
	}
	text := runCLI(t, append([]string{"history", "--evidence", b.Key}, base...)...)
	if text.code != 0 || !strings.Contains(text.stdout, "line 500: endpointslice watch closed") || !strings.Contains(text.stdout, "gate ✓ wedged-for") ||
		!strings.Contains(text.stdout, "endpoints: 3 serving node(s)") {
		t.Errorf("history --evidence: exit %d\n%s%s", text.code, text.stdout, text.stderr)
	}
	st2 := runCLI(t, append([]string{"status"}, base...)...)
	if !strings.Contains(st2.stdout, "restart       "+s.pod.Name+": restart by delete: done\n    reason: ready 0") || !strings.Contains(st2.stdout, "    evidence bundle: "+b.Key+"\n") {
		t.Errorf("status text lacks the restart's reason and evidence:\n%s", st2.stdout)
	}
	if h := runCLI(t, append([]string{"history", "--since", "1ns"}, base...)...); h.code != 0 || !strings.Contains(h.stdout, "nothing recorded") {
		t.Errorf("history --since 1ns: exit %d\n%s", h.code, h.stdout)
	}
}

// TestEvidenceKubeletHangs: a kubelet that never answers delays the restart by the
// capture's bound at most; the bundle is saved without the log, with why, and the
// run warns.
func TestEvidenceKubeletHangs(t *testing.T) {
	k := startKubelet(t, "never sent\n")
	k.Hang()
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	onNode(t, s, k, s.pod.Name)
	s.check().expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	r := s.check()
	r.expect(t, 0, "wedged", "restart")
	if len(r.report.Restarts) != 1 || r.report.Restarts[0].Outcome != "done" {
		t.Fatalf("restarts %+v", r.report.Restarts)
	}
	if !strings.Contains(strings.Join(r.report.Warnings, "\n"), "pods/log") {
		t.Errorf("no warning about the log: %v", r.report.Warnings)
	}
	bs := s.bundles(t)
	if len(bs) != 1 || bs[0].Log != "" || bs[0].LogError == "" || bs[0].Sample == nil {
		t.Errorf("bundles %+v, want one without the log, saying why", bs)
	}
}

// TestEvidenceKeepsTheNewestLines: when the last 200 lines are more than the 64 KiB
// kept (a scheduler logging long JSON lines), the bundle holds the newest of them,
// up to the last line before the restart, starting on a whole line. The kubelet
// applies limitBytes from the first tailed line: asking it for 64 KiB would keep
// the oldest lines and drop the ones that explain the wedge.
func TestEvidenceKeepsTheNewestLines(t *testing.T) {
	pad := strings.Repeat("x", 1000)
	var log strings.Builder
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&log, "line %d: %s\n", i, pad)
	}
	k := startKubelet(t, log.String())
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	onNode(t, s, k, s.pod.Name)
	s.check().expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	s.check().expect(t, 0, "wedged", "restart")
	bs := s.bundles(t)
	if len(bs) != 1 {
		t.Fatalf("%d bundles, want 1", len(bs))
	}
	b := bs[0]
	if b.LogError != "" || len(b.Log) > evidence.DefaultLogBytes || !strings.HasPrefix(b.Log, "line ") ||
		!strings.HasSuffix(b.Log, "line 500: "+pad+"\n") {
		first, _, _ := strings.Cut(b.Log, ":")
		t.Errorf("bundle log of %d bytes from %q to %q (error %q), want at most %d bytes of whole lines ending with line 500",
			len(b.Log), first, b.Log[max(0, len(b.Log)-20):], b.LogError, evidence.DefaultLogBytes)
	}
}

// TestEvidenceWithoutLogs: --evidence-logs=false (chart evidence.logs: false, which
// removes the pods/log grant) saves the bundle without asking the kubelet, and is
// no warning: it is what was asked for.
func TestEvidenceWithoutLogs(t *testing.T) {
	k := startKubelet(t, "never read\n")
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	onNode(t, s, k, s.pod.Name)
	s.check("--evidence-logs=false").expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	r := s.check("--evidence-logs=false")
	r.expect(t, 0, "wedged", "restart")
	if calls := k.Requests(); len(calls) != 0 {
		t.Errorf("the kubelet was asked %v", calls)
	}
	if len(r.report.Warnings) != 0 {
		t.Errorf("warnings %v, want none", r.report.Warnings)
	}
	bs := s.bundles(t)
	if len(bs) != 1 || bs[0].Log != "" || !strings.Contains(bs[0].LogError, "--evidence-logs=false") || bs[0].Sample == nil {
		t.Errorf("bundles %+v, want one without the log, saying why", bs)
	}
}

// TestEvidenceSealedOnTheAPIServer: with --outbox-key the run saves its bundle
// sealed in the evidence ConfigMap on the API server; history given the key says
// the bundle is the watchdog's, and marks it once someone edits it there (as a
// namespace editor may), beside the restart and on the bundle.
func TestEvidenceSealedOnTheAPIServer(t *testing.T) {
	k := startKubelet(t, "2026-12-01T10:00:00Z endpointslice watch closed; not re-established\n")
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	onNode(t, s, k, s.pod.Name)
	keyed := []string{"--outbox-key", outboxKey}
	s.check(keyed...).expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	s.check(keyed...).expect(t, 0, "wedged", "restart")
	bs := s.bundles(t)
	if len(bs) != 1 {
		t.Fatalf("%d bundles, want 1", len(bs))
	}
	base := []string{"--kubeconfig", env.Kubeconfig, "--namespace", s.ns}
	show := func(args ...string) string {
		t.Helper()
		r := runCLI(t, append(append([]string{"history"}, base...), args...)...)
		if r.code != 0 {
			t.Fatalf("history %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
		}
		return r.stdout
	}
	if out := show("--evidence", bs[0].Key, "--outbox-key", outboxKey); !strings.Contains(out, "seal: ✓ sealed") {
		t.Errorf("the watchdog's own bundle, checked with its key:\n%s", out)
	}
	if out := show("--evidence", bs[0].Key, "--key-secret", ""); !strings.Contains(out, "seal: ✗ sealed, not checked") {
		t.Errorf("the bundle read without the key:\n%s", out)
	}

	// An editor rewrites the log line the operator will read.
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cm, err := env.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, "agentenv-scheduler-watchdog-evidence", metav1.GetOptions{})
	must(t, err)
	cm.Data[bs[0].Key] = strings.Replace(cm.Data[bs[0].Key], "watch closed; not re-established", "all healthy, no problem", 1)
	_, err = env.Client.CoreV1().ConfigMaps(s.ns).Update(ctx, cm, metav1.UpdateOptions{})
	must(t, err)
	if out := show("--evidence", bs[0].Key, "--outbox-key", outboxKey); !strings.Contains(out, "seal: ✗ SEAL DOES NOT VERIFY") || !strings.Contains(out, "all healthy") {
		t.Errorf("the edited bundle:\n%s", out)
	}
	if out := show("--outbox-key", outboxKey); strings.Count(out, "SEAL DOES NOT VERIFY") != 1 {
		t.Errorf("history does not mark the restart whose bundle was edited:\n%s", out)
	}
}
