package integration

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/slack-go/slack"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/alerttest"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/deliver"
	"github.com/agentenv/watchdog/pkg/events"
	"github.com/agentenv/watchdog/pkg/state"
)

// Secret-looking parts of the alert configuration. None may appear in anything the
// watchdog prints, logs, records or leaves in the cluster.
const (
	webhookPath   = "/hooks/XXXXWEBHOOKPATHSECRET"
	slackPath     = "/services/T000/B000/XXXXSLACKSECRET"
	heartbeatPath = "/ping/XXXXHEARTBEATSECRET"
	hmacKey       = "hmac-XXXXKEYSECRET-of-32-bytes-or-more"
	outboxKey     = "outbox-key-of-32-bytes-XXXXOUTBOXSECRET"
	clusterName   = "it-cluster"
)

var secretMarkers = []string{"XXXXWEBHOOKPATHSECRET", "XXXXSLACKSECRET", "XXXXHEARTBEATSECRET", "XXXXKEYSECRET", "XXXXOUTBOXSECRET", "/hooks/", "/services/T000"}

// received is one request a receiver got.
type received struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// receiver records alert deliveries on 127.0.0.1; its answer can be changed
// between runs: a status code, or hanging until the client gives up.
type receiver struct {
	srv     *httptest.Server
	mu      sync.Mutex
	reqs    []received
	status  map[string]int // by path; "" for every other path
	hang    bool
	delay   time.Duration // before each answer
	release chan struct{}
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{status: map[string]int{}, release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		close(r.release)
		r.srv.Close()
	})
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, received{Method: req.Method, Path: req.URL.Path, Header: req.Header.Clone(), Body: body})
	code, ok := r.status[req.URL.Path]
	if !ok {
		code = r.status[""]
	}
	hang, delay := r.hang, r.delay
	r.mu.Unlock()
	select {
	case <-time.After(delay):
	case <-req.Context().Done():
		return
	}
	if hang {
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
		return
	}
	if code == 0 {
		code = http.StatusOK
	}
	w.WriteHeader(code)
}

func (r *receiver) url(path string) string { return r.srv.URL + path }

// setStatus answers code on path ("" for all paths); 0 is 200.
func (r *receiver) setStatus(path string, code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status[path] = code
}

// setDelay makes every answer come after d, as a slow receiver's does.
func (r *receiver) setDelay(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.delay = d
}

func (r *receiver) setHang(hang bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hang = hang
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.reqs...)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reqs)
}

// since returns the requests to path received after the first n requests.
func (r *receiver) since(n int, path string) []received {
	var out []received
	for _, q := range r.all()[n:] {
		if q.Path == path {
			out = append(out, q)
		}
	}
	return out
}

// webhooks decodes generic webhook deliveries, checking each signature.
func webhooks(t *testing.T, reqs []received) []alert.Notification {
	t.Helper()
	var out []alert.Notification
	for _, q := range reqs {
		if !alerttest.Verify([]byte(hmacKey), q.Header.Get(deliver.HeaderTimestamp), q.Header.Get(deliver.HeaderSignature), q.Body, time.Now(), 5*time.Minute) {
			t.Errorf("webhook delivery with a bad signature: %v %s", q.Header, q.Body)
		}
		var n alert.Notification
		if err := json.Unmarshal(q.Body, &n); err != nil {
			t.Fatalf("webhook body is not a notification: %v\n%s", err, q.Body)
		}
		if n.SchemaVersion != alert.SchemaVersion {
			t.Errorf("schemaVersion %d", n.SchemaVersion)
		}
		out = append(out, n)
	}
	return out
}

func eventNames(ns []alert.Notification) []string {
	out := []string{}
	for _, n := range ns {
		e := n.Event
		if n.Reminder {
			e += "+r"
		}
		out = append(out, e)
	}
	return out
}

func slackTexts(t *testing.T, reqs []received) []string {
	t.Helper()
	var out []string
	for _, q := range reqs {
		var m slack.WebhookMessage
		if err := json.Unmarshal(q.Body, &m); err != nil {
			t.Fatalf("Slack body: %v\n%s", err, q.Body)
		}
		out = append(out, m.Text)
	}
	return out
}

func alertFlags(r *receiver) []string {
	return []string{
		"--webhook-url", r.url(webhookPath), "--webhook-secret", hmacKey,
		"--slack-webhook-url", r.url(slackPath), "--cluster-name", clusterName,
	}
}

// checkAlertFlags are alertFlags for check and run, which keep refused alerts in
// the state for retry, sealed with the outbox key (as the chart configures them).
func checkAlertFlags(r *receiver) []string {
	return append(alertFlags(r), "--outbox-key", outboxKey)
}

// leakCheck greps everything the watchdog produced for the secrets: stdout and
// stderr (JSON report and logs) of every run, every Event in the namespace, and the
// state ConfigMap.
func leakCheck(t *testing.T, s *scenario, runs ...result) {
	t.Helper()
	leakCheckFor(t, s, secretMarkers, runs...)
}

// leakCheckFor is leakCheck for the given secrets.
func leakCheckFor(t *testing.T, s *scenario, secrets []string, runs ...result) {
	t.Helper()
	var hay []string
	for _, r := range runs {
		hay = append(hay, r.stdout, r.stderr)
	}
	ctx, cancel := testenv.Ctx()
	defer cancel()
	evs, err := env.Client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	b, _ := json.Marshal(evs.Items)
	hay = append(hay, string(b))
	cms, err := env.Client.CoreV1().ConfigMaps(s.ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	b, _ = json.Marshal(cms.Items)
	hay = append(hay, string(b))
	all := strings.Join(hay, "\n")
	for _, m := range secrets {
		if i := strings.Index(all, m); i >= 0 {
			t.Errorf("secret %q leaked: ...%s...", m, all[max(0, i-200):min(len(all), i+100)])
		}
	}
}

// deliveries picks the report's deliveries of event to sink.
func deliveries(r result, event, sink string) []deliver.Delivery {
	var out []deliver.Delivery
	for _, d := range r.report.Alerts {
		if d.Event == event && d.Sink == sink {
			out = append(out, d)
		}
	}
	return out
}

func TestAlertDedupReminderRecovered(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	// --wedged-for 1h: the wedge stays open (no restart) while runs repeat.
	flags := append(checkAlertFlags(rcv), "--wedged-for", "1h", "--realert-interval", "2s")
	var runs []result
	run := func() result {
		r := s.check(flags...)
		runs = append(runs, r)
		return r
	}

	first := run()
	firstAt := time.Now()
	first.expect(t, 0, "wedged", "wait")
	hooks := webhooks(t, rcv.since(0, webhookPath))
	if got := eventNames(hooks); len(got) != 1 || got[0] != "wedged" {
		t.Fatalf("first run sent %v, want [wedged]", got)
	}
	n := hooks[0]
	if n.Cluster != clusterName || n.Namespace != s.ns || n.Pod != s.pod.Name || n.UID != string(s.pod.UID) ||
		n.Severity != "critical" || *n.Ready != 0 || *n.Expected != 3 || n.Since == nil || n.DryRun || n.Action != "wait" {
		t.Errorf("wedged payload %+v", n)
	}
	if texts := slackTexts(t, rcv.since(0, slackPath)); len(texts) != 1 || !strings.Contains(texts[0], "[CRITICAL] scheduler wedged in "+clusterName+"/"+s.ns) {
		t.Errorf("Slack got %q", texts)
	}
	if d := deliveries(first, "wedged", "webhook"); len(d) != 1 || !d[0].OK || d[0].ID != n.ID {
		t.Errorf("report deliveries %+v", first.report.Alerts)
	}

	// Runs within the realert interval send nothing, through the real ConfigMap.
	mark := rcv.count()
	run().expect(t, 0, "wedged", "wait")
	run().expect(t, 0, "wedged", "wait")
	if got := rcv.all()[mark:]; len(got) != 0 {
		t.Fatalf("repeated runs sent %d more requests", len(got))
	}
	st, _ := s.state()
	if a := st.Alerts[alert.EventWedged]; a == nil || a.Sends != 1 || a.Pod != s.pod.Name {
		t.Fatalf("state alert %+v", a)
	}
	if evs := s.events(s.pod.Name, alert.Spec(alert.EventWedged).Reason); len(evs) != 1 {
		t.Errorf("%d %s Events, want 1", len(evs), alert.Spec(alert.EventWedged).Reason)
	}

	// Past the interval: one reminder, then quiet again.
	time.Sleep(time.Until(firstAt.Add(2100 * time.Millisecond)))
	mark = rcv.count()
	run().expect(t, 0, "wedged", "wait")
	if got := eventNames(webhooks(t, rcv.since(mark, webhookPath))); len(got) != 1 || got[0] != "wedged+r" {
		t.Fatalf("after the interval sent %v, want [wedged+r]", got)
	}
	if texts := slackTexts(t, rcv.since(mark, slackPath)); len(texts) != 1 {
		t.Errorf("Slack reminders %q", texts)
	}
	mark = rcv.count()
	run().expect(t, 0, "wedged", "wait")
	if rcv.count() != mark {
		t.Fatal("a second reminder within the interval")
	}

	// Healthy again: recovered, exactly once.
	s.metrics.SetPage(fixture(t, "scheduler-metrics-healthy.txt"))
	mark = rcv.count()
	run().expect(t, 0, "healthy", "none")
	rec := webhooks(t, rcv.since(mark, webhookPath))
	if got := eventNames(rec); len(got) != 1 || got[0] != "recovered" {
		t.Fatalf("recovery sent %v, want [recovered]", got)
	}
	if rec[0].Severity != "info" || !strings.Contains(rec[0].Reason, "was wedged since") {
		t.Errorf("recovered %+v", rec[0])
	}
	if texts := slackTexts(t, rcv.since(mark, slackPath)); len(texts) != 1 || !strings.Contains(texts[0], "recovered") {
		t.Errorf("Slack recovered %q", texts)
	}
	mark = rcv.count()
	run().expect(t, 0, "healthy", "none")
	waitPastWedgedFor() // past the interval: still nothing to remind about
	run().expect(t, 0, "healthy", "none")
	if rcv.count() != mark {
		t.Fatalf("recovered more than once: %d more requests", rcv.count()-mark)
	}
	if st, _ := s.state(); len(st.Alerts) != 0 {
		t.Errorf("alerts still open: %v", st.Alerts)
	}
	if evs := s.events(s.pod.Name, alert.Spec(alert.EventRecovered).Reason); len(evs) != 1 || evs[0].Type != corev1.EventTypeNormal {
		t.Errorf("recovered Events %+v", evs)
	}
	leakCheck(t, s, runs...)
}

func TestAlertDryRunSendsNothing(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	hb := []string{"--heartbeat-url", rcv.url(heartbeatPath)}
	dry := s.check(append(append(checkAlertFlags(rcv), hb...), "--dry-run")...)
	dry.expect(t, 0, "wedged", "wait")
	if n := rcv.count(); n != 0 {
		t.Fatalf("a dry run sent %d requests: %+v", n, rcv.all())
	}
	for _, sink := range []string{"webhook", "slack", "kubernetes-event"} {
		d := deliveries(dry, "wedged", sink)
		if len(d) != 1 || !d[0].DryRun || d[0].OK {
			t.Errorf("dry-run report lacks the would-be delivery to %s: %+v", sink, dry.report.Alerts)
		}
	}
	if st, _ := s.state(); st != nil {
		t.Error("a dry run wrote state")
	}
	if evs := s.events(s.pod.Name, ""); len(evs) != 0 {
		t.Errorf("a dry run left %d Events", len(evs))
	}
	text := s.check(append(checkAlertFlags(rcv), "--dry-run", "--output", "text")...)
	for _, want := range []string{"alert:   would send wedged to webhook", "alert:   would send wedged to slack"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("dry-run text lacks %q:\n%s", want, text.stdout)
		}
	}
	if n := rcv.count(); n != 0 {
		t.Fatalf("a text dry run sent %d requests", n)
	}
	// The dry runs marked nothing as sent: the real run alerts.
	realRun := s.check(checkAlertFlags(rcv)...)
	if got := eventNames(webhooks(t, rcv.since(0, webhookPath))); len(got) != 1 || got[0] != "wedged" {
		t.Errorf("real run after dry runs sent %v", got)
	}
	leakCheck(t, s, dry, text, realRun)
}

func TestAlertDeadReceiverDoesNotStopRestart(t *testing.T) {
	rcv := newReceiver(t)
	rcv.setStatus("", http.StatusInternalServerError)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	flags := []string{"--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--cluster-name", clusterName}

	first := s.check(flags...)
	first.expect(t, 0, "wedged", "wait")
	d := deliveries(first, "wedged", "webhook")
	if len(d) != 1 || d[0].OK || !strings.Contains(d[0].Error, "500") {
		t.Fatalf("failed delivery not reported: %+v", first.report.Alerts)
	}
	wedgedID := d[0].ID
	st, _ := s.state()
	if len(st.Outbox) != 1 || st.Outbox[0].Event != "wedged" || st.Outbox[0].ID != wedgedID || st.Outbox[0].Sinks[0] != "webhook" {
		t.Fatalf("outbox %+v", st.Outbox)
	}
	failed := s.events(s.pod.Name, events.ReasonAlertFailed)
	if len(failed) != 1 || failed[0].Type != corev1.EventTypeWarning || !strings.Contains(failed[0].Message, "retried by the next run") {
		t.Fatalf("%s Events %+v", events.ReasonAlertFailed, failed)
	}
	if !strings.Contains(first.stderr, `"message":"alert delivery failed; kept for the next run"`) {
		t.Errorf("no error log for the failed delivery:\n%s", first.stderr)
	}

	// The restart goes ahead although the receiver is still dead.
	waitPastWedgedFor()
	second := s.check(flags...)
	second.expect(t, 0, "wedged", "restart")
	if s.podExists(s.pod.Name) || len(second.report.Restarts) != 1 || second.report.Restarts[0].Outcome != "done" {
		t.Fatalf("restart did not happen: %+v", second.report.Restarts)
	}
	st, _ = s.state()
	if len(st.Restarts) != 1 || st.Restarts[0].Outcome != state.RestartDone {
		t.Fatalf("restart outcome not recorded: %+v", st.Restarts)
	}
	pending := map[string]int{}
	for _, p := range st.Outbox {
		pending[p.Event] = p.Attempts
	}
	if pending["wedged"] != 2 || pending["restarted"] != 1 || len(pending) != 2 {
		t.Fatalf("outbox after the restart run: %+v", st.Outbox)
	}

	// The receiver is back: the next run delivers both, once.
	rcv.setStatus("", 0)
	mark := rcv.count()
	third := s.check(flags...)
	if third.code != 0 {
		t.Fatalf("exit %d\n%s", third.code, third.stderr)
	}
	got := webhooks(t, rcv.since(mark, webhookPath))
	if names := eventNames(got); len(names) != 2 || names[0] != "wedged" || names[1] != "restarted" {
		t.Fatalf("retried deliveries %v, want [wedged restarted]", names)
	}
	if got[0].ID != wedgedID {
		t.Errorf("the retry is not the original alert: id %s, want %s", got[0].ID, wedgedID)
	}
	for _, d := range third.report.Alerts {
		if d.Sink == "webhook" && (!d.OK || !d.Retry) {
			t.Errorf("report delivery %+v", d)
		}
	}
	if st, _ := s.state(); len(st.Outbox) != 0 {
		t.Fatalf("outbox not emptied: %+v", st.Outbox)
	}
	mark = rcv.count()
	fourth := s.check(flags...)
	if rcv.count() != mark {
		t.Errorf("delivered twice: %d more requests", rcv.count()-mark)
	}
	leakCheck(t, s, first, second, third, fourth)
}

func TestAlertClosedReceiverRetriedNextRun(t *testing.T) {
	addr := freeAddr(t) // nothing listens: connection refused
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	flags := []string{"--webhook-url", "http://" + addr + webhookPath, "--webhook-secret", hmacKey}

	first := s.check(flags...)
	first.expect(t, 0, "wedged", "wait")
	if d := deliveries(first, "wedged", "webhook"); len(d) != 1 || d[0].OK || !strings.Contains(d[0].Error, "connection refused") {
		t.Fatalf("deliveries %+v", first.report.Alerts)
	}
	if st, _ := s.state(); len(st.Outbox) != 1 {
		t.Fatalf("outbox %+v", st.Outbox)
	}

	// The receiver comes up on the same address.
	l, err := net.Listen("tcp", addr)
	must(t, err)
	rcv := &receiver{status: map[string]int{}, release: make(chan struct{})}
	rcv.srv = httptest.NewUnstartedServer(http.HandlerFunc(rcv.serve))
	rcv.srv.Listener = l
	rcv.srv.Start()
	defer rcv.srv.Close()
	second := s.check(flags...)
	if got := eventNames(webhooks(t, rcv.all())); len(got) != 1 || got[0] != "wedged" {
		t.Fatalf("next run delivered %v", got)
	}
	if st, _ := s.state(); len(st.Outbox) != 0 {
		t.Errorf("outbox %+v", st.Outbox)
	}
	leakCheck(t, s, first, second)
}

// A receiver that never answers must not eat the run's deadline: the run still
// records its outcome and keeps the alert for the next run.
func TestAlertHangingReceiverLeavesTimeToPersist(t *testing.T) {
	rcv := newReceiver(t)
	rcv.setHang(true)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	// One attempt (--alert-timeout) may last as long as the whole run (--timeout).
	r := s.check("--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--wedged-for", "1h", "--timeout", "3s", "--alert-timeout", "3s")
	r.expect(t, 0, "wedged", "wait")
	if !r.report.StateWritten {
		t.Fatal("state not written")
	}
	if r.took > 3*time.Second {
		t.Errorf("took %s, beyond --timeout", r.took)
	}
	st, _ := s.state()
	if len(st.Outbox) != 1 || st.Outbox[0].Event != "wedged" || !strings.Contains(st.Outbox[0].LastError, "deadline") && !strings.Contains(st.Outbox[0].LastError, "timed out") {
		t.Fatalf("outbox %+v", st.Outbox)
	}
	// It comes back: delivered next run.
	rcv.setHang(false)
	mark := rcv.count()
	s.check("--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--wedged-for", "1h", "--timeout", "3s")
	if got := eventNames(webhooks(t, rcv.since(mark, webhookPath))); len(got) != 1 || got[0] != "wedged" {
		t.Errorf("after the receiver came back: %v, want [wedged]", got)
	}
	leakCheck(t, s, r)
}

func TestAlertSecretsNeverLeak(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	// Secrets from the environment, as the chart's Secret provides them.
	t.Setenv("WATCHDOG_WEBHOOK_URL", rcv.url(webhookPath))
	t.Setenv("WATCHDOG_WEBHOOK_SECRET", hmacKey)
	t.Setenv("WATCHDOG_SLACK_WEBHOOK_URL", rcv.url(slackPath))
	t.Setenv("WATCHDOG_HEARTBEAT_URL", rcv.url(heartbeatPath))
	debug := []string{"--log-level", "debug"}
	var runs []result

	// Everything fails: deliveries, retries, the dead man's switch.
	rcv.setStatus("", http.StatusInternalServerError)
	runs = append(runs, s.check(debug...))
	runs[0].expect(t, 0, "wedged", "wait")
	if len(webhooks(t, rcv.since(0, webhookPath))) == 0 {
		t.Fatal("the secrets from the environment were not used")
	}
	// A 404 is final (no retry): the same failure paths, faster.
	rcv.setStatus("", http.StatusNotFound)
	waitPastWedgedFor()
	runs = append(runs, s.check(append(debug, "--output", "text")...)) // restart, alerts fail again
	runs = append(runs, s.check(debug...))
	// Everything works.
	rcv.setStatus("", 0)
	runs = append(runs, s.check(debug...))
	runs = append(runs, s.check(append(debug, "--dry-run")...))
	runs = append(runs, runCLI(t, "status", "--kubeconfig", env.Kubeconfig, "--namespace", s.ns, "--output", "json"))
	runs = append(runs, runCLI(t, "status", "--kubeconfig", env.Kubeconfig, "--namespace", s.ns))
	// notify test, failing and not.
	runs = append(runs, runCLI(t, "notify", "test"))
	rcv.setStatus(webhookPath, http.StatusInternalServerError)
	runs = append(runs, runCLI(t, "notify", "test"))
	// Bad values of secret flags are refused without echoing them.
	runs = append(runs, runCLI(t, "notify", "test", "--webhook-url", "http://example.com"+webhookPath))
	runs = append(runs, runCLI(t, "check", "--kubeconfig", env.Kubeconfig, "--slack-webhook-url", "ftp://127.0.0.1"+slackPath))
	t.Setenv("WATCHDOG_HEARTBEAT_URL", "http://example.com"+heartbeatPath)
	runs = append(runs, runCLI(t, "notify", "test"))
	for _, r := range runs[len(runs)-3:] {
		if r.code != 2 {
			t.Errorf("bad secret URL: exit %d, want 2\n%s", r.code, r.stderr)
		}
	}
	if rcv.count() == 0 || !strings.Contains(strings.Join([]string{runs[7].stdout, runs[8].stdout}, ""), "FAILED") {
		t.Fatal("the runs did not exercise failures")
	}
	leakCheck(t, s, runs...)
}

func TestNotifyTestExitCodes(t *testing.T) {
	rcv := newReceiver(t)
	all := append(alertFlags(rcv), "--heartbeat-url", rcv.url(heartbeatPath), "--namespace", "agentenv-it")

	ok := runCLI(t, append([]string{"notify", "test"}, all...)...)
	if ok.code != 0 {
		t.Fatalf("exit %d, want 0\n%s%s", ok.code, ok.stdout, ok.stderr)
	}
	for _, want := range []string{"slack      ok", "webhook    ok", "heartbeat  ok"} {
		if !strings.Contains(ok.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, ok.stdout)
		}
	}
	hooks := webhooks(t, rcv.since(0, webhookPath))
	if len(hooks) != 1 || hooks[0].Event != "test" || !hooks[0].Test || hooks[0].Cluster != clusterName || hooks[0].Namespace != "agentenv-it" || hooks[0].Severity != "info" {
		t.Errorf("test webhook %+v", hooks)
	}
	if texts := slackTexts(t, rcv.since(0, slackPath)); len(texts) != 1 || !strings.Contains(texts[0], "scheduler test") {
		t.Errorf("test Slack message %q", texts)
	}
	if len(rcv.since(0, heartbeatPath)) != 1 {
		t.Error("no heartbeat ping")
	}

	// One sink fails: exit 1, the others still tried and reported.
	rcv.setStatus(slackPath, http.StatusInternalServerError)
	mark := rcv.count()
	bad := runCLI(t, append([]string{"notify", "test", "--alert-timeout", "2s"}, all...)...)
	if bad.code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
	if !strings.Contains(bad.stdout, "slack      FAILED: slack: answered 500") || !strings.Contains(bad.stdout, "webhook    ok") {
		t.Errorf("per-sink report:\n%s", bad.stdout)
	}
	if len(rcv.since(mark, webhookPath)) != 1 {
		t.Error("webhook not tried after Slack failed")
	}
	if !strings.Contains(bad.stderr, "1 sink(s) failed") {
		t.Errorf("stderr %s", bad.stderr)
	}

	// No sink: exit 2.
	none := runCLI(t, "notify", "test")
	if none.code != 2 || !strings.Contains(none.stderr, "no sink configured") {
		t.Errorf("no sink: exit %d\n%s", none.code, none.stderr)
	}
	// Plain http to a non-loopback host is refused before anything is sent.
	mark = rcv.count()
	plain := runCLI(t, "notify", "test", "--webhook-url", "http://example.com/hook")
	if plain.code != 2 || !strings.Contains(plain.stderr, "plain http is accepted only for loopback") || strings.Contains(plain.stderr, "example.com") {
		t.Errorf("plain http: exit %d\n%s", plain.code, plain.stderr)
	}
	if n := rcv.count(); n != mark {
		t.Errorf("refused configurations sent %d request(s)", n-mark)
	}
}

func TestHeartbeat(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	hb := []string{"--heartbeat-url", rcv.url(heartbeatPath), "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey}

	ok := s.check(hb...)
	ok.expect(t, 0, "healthy", "none")
	pings := rcv.since(0, heartbeatPath)
	if len(pings) != 1 || pings[0].Method != http.MethodPost || string(pings[0].Body) != "ok" {
		t.Fatalf("pings after a completed run: %+v", pings)
	}
	if n := len(rcv.since(0, heartbeatPath+"/fail")); n != 0 {
		t.Fatalf("%d /fail pings after a completed run", n)
	}

	// A dry run pings nothing.
	mark := rcv.count()
	s.check(append(hb, "--dry-run")...).expect(t, 0, "healthy", "none")
	if rcv.count() != mark {
		t.Error("a dry run pinged")
	}

	// A failed run (an identity with no rights): <url>/fail, and watchdog-error
	// goes out to the sink that is still reachable.
	token := serviceAccountToken(t, s.ns, "nobody")
	path, err := env.WriteKubeconfig("hb-nobody-"+s.ns, token)
	must(t, err)
	args := append([]string{"check"}, s.base...)
	args[2] = path
	failed := runCLI(t, append(args, hb...)...)
	if failed.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", failed.code, failed.stderr)
	}
	fails := rcv.since(mark, heartbeatPath+"/fail")
	// A fixed category, never the error text (namespace, API server address): the
	// dead man's switch is a third party.
	if len(fails) != 1 || string(fails[0].Body) != "failed: read-state" {
		t.Fatalf("/fail pings %+v", fails)
	}
	if n := len(rcv.since(mark, heartbeatPath)); n != 0 {
		t.Errorf("%d success pings after a failed run", n)
	}
	if got := eventNames(webhooks(t, rcv.since(mark, webhookPath))); len(got) != 1 || got[0] != "watchdog-error" {
		t.Errorf("failed run alerted %v, want [watchdog-error]", got)
	}

	// The API server unreachable altogether: /fail as well.
	unreach, err := env.WriteKubeconfig("hb-nowhere-"+s.ns, "token")
	must(t, err)
	raw, err := readFile(unreach)
	must(t, err)
	must(t, writeFile(unreach, strings.Replace(raw, env.Config.Host, "https://127.0.0.1:1", 1)))
	mark = rcv.count()
	r := runCLI(t, append([]string{"check", "--kubeconfig", unreach, "--namespace", s.ns, "--timeout", "10s", "--api-timeout", "2s", "--output", "json"}, hb...)...)
	if r.code != 1 || len(rcv.since(mark, heartbeatPath+"/fail")) != 1 {
		t.Errorf("unreachable API server: exit %d, %d /fail pings", r.code, len(rcv.since(mark, heartbeatPath+"/fail")))
	}
	leakCheck(t, s, ok, failed, r)
}

// A run that fails after reading state (here: it may read and write its ConfigMap
// but not list pods) keeps an undelivered watchdog-error in the outbox, and
// delivers it once on the next run.
func TestWatchdogErrorKeptInOutbox(t *testing.T) {
	rcv := newReceiver(t)
	rcv.setStatus("", http.StatusInternalServerError)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	args := restrictedCheck(t, s, "state-only", []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	})
	args = append(args, "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey)

	first := runUntil(t, args, `cannot list resource \"pods\"`)
	if first.code != 1 || !first.report.StateWritten {
		t.Fatalf("exit %d stateWritten %v\n%s", first.code, first.report.StateWritten, first.stderr)
	}
	st, _ := s.state()
	if a := st.Alerts[alert.EventWatchdogError]; a == nil || a.Sends != 1 {
		t.Fatalf("watchdog-error not recorded: %+v", st.Alerts)
	}
	if len(st.Outbox) != 1 || st.Outbox[0].Event != alert.EventWatchdogError {
		t.Fatalf("the undelivered watchdog-error is not in the outbox: %+v", st.Outbox)
	}
	if evs := s.events("agentenv-scheduler-watchdog", events.ReasonAlertFailed); len(evs) != 1 {
		t.Errorf("%d %s Events on the state ConfigMap", len(evs), events.ReasonAlertFailed)
	}

	rcv.setStatus("", 0)
	mark := rcv.count()
	second := runCLI(t, args...)
	if got := eventNames(webhooks(t, rcv.since(mark, webhookPath))); len(got) != 1 || got[0] != "watchdog-error" {
		t.Fatalf("next run delivered %v, want [watchdog-error]", got)
	}
	if st, _ := s.state(); len(st.Outbox) != 0 {
		t.Fatalf("outbox not emptied: %+v", st.Outbox)
	}
	mark = rcv.count()
	third := runCLI(t, args...)
	if rcv.count() != mark {
		t.Errorf("watchdog-error delivered again: %d more requests", rcv.count()-mark)
	}
	leakCheck(t, s, first, second, third)
}

// restrictedCheck returns `watchdog check` arguments for s that run as a
// ServiceAccount holding only rules in s's namespace.
func restrictedCheck(t *testing.T, s *scenario, name string, rules []rbacv1.PolicyRule) []string {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := env.Client.RbacV1().Roles(s.ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
	must(t, err)
	_, err = env.Client.RbacV1().RoleBindings(s.ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: s.ns}},
	}, metav1.CreateOptions{})
	must(t, err)
	path, err := env.WriteKubeconfig(name+"-"+s.ns, serviceAccountToken(t, s.ns, name))
	must(t, err)
	args := append([]string{"check"}, s.base...)
	args[2] = path // --kubeconfig value
	return args
}

// runUntil runs args until stderr shows want: a new RoleBinding reaches the
// authorizer quickly, but not instantly.
func runUntil(t *testing.T, args []string, want string) result {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := runCLI(t, args...)
		if strings.Contains(r.stderr, want) || time.Now().After(deadline) {
			return r
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// readOnlyState is everything a healthy check needs except writing its ConfigMap.
var readOnlyState = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
	// --judge-pods deployment: which pods are the Deployment's, by UID.
	{APIGroups: []string{"apps"}, Resources: []string{"deployments", "replicasets"}, Verbs: []string{"get"}},
}

// A run that can read its state but not write it sends watchdog-error, and
// delivers what was pending exactly once.
func TestAlertStateUnwritable(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	// A pending alert from an earlier run.
	seed := state.New()
	payload, err := json.Marshal(alert.Notification{SchemaVersion: 1, ID: "pending-1", Event: "wedged", Severity: "critical", Namespace: s.ns, Reason: "earlier", Time: time.Now().UTC()})
	must(t, err)
	seed.Outbox = []state.Pending{{ID: "pending-1", Event: "wedged", CreatedAt: time.Now(), Attempts: 1, Sinks: []string{"webhook"}, Payload: payload}}
	writeState(t, s.ns, seed)
	args := restrictedCheck(t, s, "read-only-state", readOnlyState)
	args = append(args, "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey, "--heartbeat-url", rcv.url(heartbeatPath))

	r := runUntil(t, args, `cannot update resource \"configmaps\"`)
	if r.code != 1 || !strings.Contains(r.stderr, "write state") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var ids []string
	for _, n := range webhooks(t, rcv.since(0, webhookPath)) {
		ids = append(ids, n.Event+":"+n.ID)
	}
	var errs, pending int
	for _, id := range ids {
		switch {
		case strings.HasPrefix(id, "watchdog-error:"):
			errs++
		case id == "wedged:pending-1":
			pending++
		}
	}
	if errs != 1 || pending != 1 {
		t.Errorf("deliveries %v: want watchdog-error once and the pending alert once", ids)
	}
	if len(rcv.since(0, heartbeatPath+"/fail")) != 1 {
		t.Error("no /fail ping")
	}
	leakCheck(t, s, r)
}

// A run that closes watchdog-error with recovered but then cannot write its state
// must not leave "recovered" as the last word: it alerts watchdog-error afresh.
func TestRecoveredThenStateUnwritableAlertsAgain(t *testing.T) {
	rcv := newReceiver(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	// An earlier run's watchdog-error, sent a minute ago (no reminder due).
	seed := state.New()
	sent := time.Now().Add(-time.Minute)
	seed.Alerts[alert.EventWatchdogError] = &state.Alert{Event: alert.EventWatchdogError, OpenedAt: sent, LastSentAt: &sent, Sends: 1}
	writeState(t, s.ns, seed)
	args := restrictedCheck(t, s, "read-only-state", readOnlyState)
	args = append(args, "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey)
	// Wait for the RoleBinding to reach the authorizer with dry runs, which read
	// as a real run does and send nothing: earlier refusals would alert too.
	if dry := runUntil(t, append(slices.Clone(args), "--dry-run"), "run complete"); dry.code != 0 {
		t.Fatalf("dry run: exit %d\n%s", dry.code, dry.stderr)
	}

	mark := rcv.count()
	r := runCLI(t, args...)
	if r.code != 1 || !strings.Contains(r.stderr, "write state") {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if got := eventNames(webhooks(t, rcv.since(mark, webhookPath))); !slices.Equal(got, []string{"recovered", "watchdog-error"}) {
		t.Fatalf("delivered %v, want recovered then watchdog-error", got)
	}
	leakCheck(t, s, r)
}
