package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

func TestHealthy(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	r := s.check()
	r.expect(t, 0, "healthy", "none")
	tg := r.report.Targets[0]
	if tg.Pod != s.pod.Name || tg.UID != string(s.pod.UID) || *tg.Ready != 3 || *tg.Expected != 3 || !tg.Judged {
		t.Errorf("target %+v", tg)
	}
	st, _ := s.state()
	if st == nil || st.LastRun == nil || st.LastRun.Verdict != "healthy" || st.Pods[string(s.pod.UID)].Counters.HeartbeatOK != 2160 {
		t.Fatalf("state not recorded: %+v", st)
	}
	if !strings.Contains(r.stderr, `"message":"run complete`) || !strings.Contains(r.stderr, `"verdict":"healthy"`) {
		t.Errorf("no summary log line on stderr:\n%s", r.stderr)
	}
}

func TestStarting(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt"), started: time.Now().Add(-30 * time.Second)})
	r := s.check("--startup-grace", "2m")
	r.expect(t, 0, "starting", "none")
}

func TestNoServingNodes(t *testing.T) {
	s := newScenario(t, layout{serving: 0, page: testenv.Page(testenv.Values{Ready: 0, HeartbeatOK: 10})})
	s.check().expect(t, 0, "no-nodes", "none")
	time.Sleep(2500 * time.Millisecond)
	s.check().expect(t, 0, "no-nodes", "none")
	if !s.podExists(s.pod.Name) {
		t.Fatal("no serving nodes must never restart")
	}
}

func TestWedgedWaitThenRestart(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	first := s.check()
	first.expect(t, 0, "wedged", "wait")
	if !s.podExists(s.pod.Name) {
		t.Fatal("restarted on first sight")
	}
	waitPastWedgedFor()
	second := s.check()
	second.expect(t, 0, "wedged", "restart")
	if s.podExists(s.pod.Name) {
		t.Fatal("the wedged pod still exists after the restart")
	}
	st, _ := s.state()
	if len(st.Restarts) != 1 || st.Restarts[0].UID != string(s.pod.UID) || st.Restarts[0].Outcome != state.RestartDone || st.Restarts[0].Method != "delete" {
		t.Fatalf("restart not recorded: %+v", st.Restarts)
	}
	if evs := s.events(s.pod.Name, alert.Spec(alert.EventRestarted).Reason); len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning {
		t.Errorf("want one restart Event on the pod, got %+v", evs)
	}
	if evs := s.events("agentenv-scheduler", alert.Spec(alert.EventRestarted).Reason); len(evs) != 1 {
		t.Errorf("want one restart Event on the Deployment, got %d", len(evs))
	}
	if len(second.report.Restarts) != 1 || second.report.Restarts[0].Outcome != "done" {
		t.Errorf("report restarts %+v", second.report.Restarts)
	}

	// The next run finds no pod: nothing to judge, and no second restart.
	third := s.check()
	third.expect(t, 0, "unknown", "none")
	st, _ = s.state()
	if len(st.Restarts) != 1 {
		t.Fatalf("restarted twice: %+v", st.Restarts)
	}
}

func TestDryRunChangesNothing(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	s.check().expect(t, 0, "wedged", "wait")
	_, rvBefore := s.state()
	eventsBefore := len(s.events(s.pod.Name, ""))
	waitPastWedgedFor()

	r := s.check("--dry-run")
	r.expect(t, 0, "wedged", "restart")
	if !r.report.DryRun || r.report.StateWritten {
		t.Errorf("dry run report: dryRun=%v stateWritten=%v", r.report.DryRun, r.report.StateWritten)
	}
	if _, rvAfter := s.state(); rvAfter != rvBefore {
		t.Errorf("dry run wrote the state ConfigMap: resourceVersion %s → %s", rvBefore, rvAfter)
	}
	if !s.podExists(s.pod.Name) {
		t.Error("dry run deleted the pod")
	}
	if n := len(s.events(s.pod.Name, "")); n != eventsBefore {
		t.Errorf("dry run recorded Events: %d → %d", eventsBefore, n)
	}

	text := s.check("--dry-run", "--output", "text")
	for _, want := range []string{"would restart", "wedged", "budget 0/3 used", "≥ 2s"} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("dry-run text lacks %q:\n%s", want, text.stdout)
		}
	}
	if _, rvAfter := s.state(); rvAfter != rvBefore {
		t.Error("text dry run wrote state")
	}
}

func TestUnknownScrapes(t *testing.T) {
	dead := fixture(t, "scheduler-metrics-discovery-dead.txt")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cases := []struct {
		name    string
		handler http.HandlerFunc
		reason  string
	}{
		{"HTTP 500", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "oops", 500) }, "500"},
		{"HTML page", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body>Sign in</body></html>"))
		}, "text/html"},
		{"truncated page", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(dead[:len(dead)/2]))
		}, "middle of a line"},
		{"absent family", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("# TYPE go_goroutines gauge\ngo_goroutines 12\n"))
		}, "absent"},
		{"NaN", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(strings.Replace(dead, `{status="ready"} 0`, `{status="ready"} NaN`, 1)))
		}, "NaN"},
		{"duplicate series", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(strings.Replace(dead, `agentenv_scheduler_observed_nodes{status="ready"} 0`,
				"agentenv_scheduler_observed_nodes{status=\"ready\"} 0\nagentenv_scheduler_observed_nodes{status=\"ready\"} 3", 1)))
		}, "duplicate series"},
		{"never answers", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}, "timeout"},
		{"oversized body", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(dead))
			chunk := []byte(strings.Repeat("# padding\n", 10000))
			for i := 0; i < 400; i++ {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, "exceeds"},
	}
	s := newScenario(t, layout{serving: 3, page: dead})
	s.check().expect(t, 0, "wedged", "wait")
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s.metrics.SetHandler(tc.handler)
			r := s.check("--metrics-max-bytes", "1048576")
			r.expect(t, 0, "unknown", "none")
			if !strings.Contains(r.report.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", r.report.Reason, tc.reason)
			}
			if !s.podExists(s.pod.Name) {
				t.Fatal("restarted on an unknown")
			}
			st, _ := s.state()
			bad := st.Pods[string(s.pod.UID)].Episode
			if bad == nil || bad.For != 0 {
				t.Errorf("an unknown must neither end nor advance the wedge clock: %+v", bad)
			}
		})
	}
	st, _ := s.state()
	if st.ConsecutiveUnknownRuns != len(cases) {
		t.Errorf("consecutive unknown runs = %d, want %d", st.ConsecutiveUnknownRuns, len(cases))
	}
}

func TestBudgetSpentBlocks(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	// Three restarts of earlier pods within the hour.
	seed := state.New()
	for i := 1; i <= 3; i++ {
		seed.Restarts = append(seed.Restarts, state.Restart{Pod: "old", UID: "old-uid", Method: "delete", ClaimedAt: time.Now().Add(-time.Duration(i) * 10 * time.Minute), Outcome: state.RestartDone})
	}
	writeState(t, s.ns, seed)
	s.check().expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
	r := s.check()
	r.expect(t, 0, "wedged", "blocked")
	if !strings.Contains(r.report.Reason, "budget 3/3 used") {
		t.Errorf("reason %q", r.report.Reason)
	}
	if !s.podExists(s.pod.Name) {
		t.Fatal("restarted past the budget")
	}
	if evs := s.events(s.pod.Name, alert.Spec(alert.EventRestartBlocked).Reason); len(evs) != 1 {
		t.Errorf("want one blocked Event, got %d", len(evs))
	}
}

// TestFutureRestartRecordsDoNotBlock, on the real API server: a
// namespace editor fills the restart budget with records dated a year ahead (the
// cluster's `edit` role may update the state ConfigMap). The restart that comes
// due is made, the run warns that the records are dated in the future, and the
// budget gate says they were not counted. Seen failing first: blocked, "budget
// 3/3 used", with the wedged pod left running.
func TestFutureRestartRecordsDoNotBlock(t *testing.T) {
	s, _ := wedgedWithRecordsAhead(t, func(_ *scenario, ahead time.Time) (records []any) {
		for i := range 3 {
			at := ahead.Add(time.Duration(i) * time.Minute)
			records = append(records, map[string]any{"pod": "old", "uid": fmt.Sprintf("old-uid-%d", i), "method": "delete", "claimedAt": at, "doneAt": at, "outcome": "done"})
		}
		return records
	})
	if st, _ := s.state(); len(st.Restarts) != 3 {
		t.Fatalf("the edited state holds %d restarts, want the 3 dated ahead", len(st.Restarts))
	}
	waitPastWedgedFor()
	r := s.check()
	r.expect(t, 0, "wedged", "restart")
	if w := strings.Join(r.report.Warnings, "\n"); !strings.Contains(w, "3 restart record(s) in the state are dated in the future") {
		t.Errorf("warnings %q, want the records dated in the future named", r.report.Warnings)
	}
	if !strings.Contains(r.report.Reason, "budget 0/3 used in the last 1h (3 dated in the future not counted)") {
		t.Errorf("reason %q, want the budget gate to say what it did not count", r.report.Reason)
	}
	if s.podExists(s.pod.Name) {
		t.Error("the wedged pod is still there: the records dated ahead blocked its restart")
	}
}

// wedgedWithRecordsAhead is a strong wedge seen once, after which restart records
// dated from a year ahead (returned) join the state, sealed: as a watchdog whose
// clock ran ahead writes them (an unsealed edit is set aside: TestOutboxForgedByANamespaceEditor).
func wedgedWithRecordsAhead(t *testing.T, records func(s *scenario, ahead time.Time) []any) (*scenario, time.Time) {
	t.Helper()
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
	s.check().expect(t, 0, "wedged", "wait")
	ahead := time.Now().AddDate(1, 0, 0).UTC()
	editState(t, namespaceEditor(t, s.ns), s.ns, func(doc map[string]any) {
		restarts, _ := doc["restarts"].([]any)
		doc["restarts"] = append(restarts, records(s, ahead)...)
	})
	reseal(t, s.ns)
	return s, ahead
}

// reseal seals the state document again with the key of the watchdog's key Secret.
func reseal(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	const name = "agentenv-scheduler-watchdog"
	sec, err := env.Client.CoreV1().Secrets(ns).Get(ctx, name+"-key", metav1.GetOptions{})
	must(t, err)
	cm, err := env.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	must(t, err)
	cm.Data[statestore.SealKey] = statestore.Seal(sec.Data[kube.KeyData], ns, name, cm.Data[statestore.DataKey])
	_, err = env.Client.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{})
	must(t, err)
}

func writeState(t *testing.T, ns string, s *state.State) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	b, err := state.Encode(s, time.Now())
	must(t, err)
	writeStateRaw(t, ctx, ns, string(b))
}

// writeStateRaw stands in for the watchdog's earlier runs: it creates the state
// ConfigMap holding raw, sealed as the watchdog seals it, with the key of the key
// Secret it creates (made here when missing), so the runs take raw as their own.
func writeStateRaw(t testing.TB, ctx context.Context, ns, raw string) {
	t.Helper()
	const name = "agentenv-scheduler-watchdog"
	key := []byte(testStateKey)
	_, err := env.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-key", Namespace: ns},
		Data: map[string][]byte{kube.KeyData: key}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		must(t, err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Data: map[string]string{statestore.DataKey: raw, statestore.SealKey: statestore.Seal(key, ns, name, raw)}}
	_, err = env.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	must(t, err)
}

// testStateKey is the key of the watchdog's key Secret in the tests that seed a state.
const testStateKey = "the integration tests' state key, 32 bytes or more"

func TestCorruptStateRecovered(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	writeStateRaw(t, ctx, s.ns, `{"version": 1, "pods": {"x": `)
	r := s.check()
	r.expect(t, 0, "healthy", "none")
	if len(r.report.Warnings) == 0 || !strings.Contains(r.report.Warnings[0], "unreadable") {
		t.Errorf("no warning about the corrupt state: %v", r.report.Warnings)
	}
	if !strings.Contains(r.stderr, `"level":"warn"`) {
		t.Error("no warning log")
	}
	cm, err := env.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	must(t, err)
	if cm.Data[statestore.CorruptKey] != `{"version": 1, "pods": {"x": ` {
		t.Errorf("the unreadable document was not kept: %q", cm.Data[statestore.CorruptKey])
	}
	if _, err := state.Decode([]byte(cm.Data[statestore.DataKey])); err != nil {
		t.Errorf("state not rewritten: %v", err)
	}
	// A newer version is not unreadable: it is refused (TestNewerStateVersionIsRefused).
}

func TestMissingStateRecreated(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	if st, _ := s.state(); st != nil {
		t.Fatal("state exists before the first run")
	}
	s.check().expect(t, 0, "healthy", "none")
	st, rv := s.state()
	if st == nil || rv == "" {
		t.Fatal("state ConfigMap not created")
	}
	ctx, cancel := testenv.Ctx()
	defer cancel()
	must(t, env.Client.CoreV1().ConfigMaps(s.ns).Delete(ctx, "agentenv-scheduler-watchdog", metav1.DeleteOptions{}))
	s.check().expect(t, 0, "healthy", "none")
	if st, _ := s.state(); st == nil {
		t.Fatal("state ConfigMap not recreated after deletion")
	}
}

// Overlapping runs restart once, and a run that lost the claim does not page
// restart-blocked: a restart already in progress is not a blocked restart.
func TestConcurrentRunsRestartOnce(t *testing.T) {
	for round := 0; round < 3; round++ {
		rcv := newReceiver(t)
		s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
		s.check().expect(t, 0, "wedged", "wait")
		waitPastWedgedFor()

		results := s.race(4, "--webhook-url", rcv.url(webhookPath), "--webhook-secret", hmacKey)

		restarted := 0
		for _, r := range results {
			if r.code != 0 {
				t.Fatalf("round %d: a racing run failed: exit %d\n%s", round, r.code, r.stderr)
			}
			restarted += len(r.report.Restarts)
			if r.report.Action == "blocked" && !strings.Contains(r.report.Reason, "restart already in progress") && !strings.Contains(r.report.Reason, "observed this pod later") {
				t.Errorf("round %d: a losing run's reason: %s", round, r.report.Reason)
			}
		}
		st, _ := s.state()
		if restarted != 1 || len(st.Restarts) != 1 {
			t.Fatalf("round %d: %d runs restarted, %d restarts recorded; want exactly one", round, restarted, len(st.Restarts))
		}
		if evs := s.events(s.pod.Name, alert.Spec(alert.EventRestarted).Reason); len(evs) != 1 {
			t.Fatalf("round %d: %d restart Events", round, len(evs))
		}
		if got := eventNames(webhooks(t, rcv.since(0, webhookPath))); slices.Contains(got, "restart-blocked") {
			t.Fatalf("round %d: the loser of the race paged restart-blocked: %v", round, got)
		}
		if evs := s.events(s.pod.Name, alert.Spec(alert.EventRestartBlocked).Reason); len(evs) != 0 {
			t.Errorf("round %d: %d restart-blocked Events", round, len(evs))
		}
	}
}

// A claim left by a run that died is completed by the next run past --timeout. Two
// runs that find it at once must not both complete it: the one that resumes it
// renews the claim, so the other re-judges from that and does nothing.
func TestConcurrentRunsResumeAClaimOnce(t *testing.T) {
	for round := 0; round < 2; round++ {
		s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
		s.check().expect(t, 0, "wedged", "wait")
		waitPastWedgedFor()
		// A claim older than --timeout (30s): its run died before acting.
		ctx, cancel := testenv.Ctx()
		cm, err := env.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
		must(t, err)
		st, err := state.Decode([]byte(cm.Data[statestore.DataKey]))
		must(t, err)
		st.Restarts = append(st.Restarts, state.Restart{Pod: s.pod.Name, UID: string(s.pod.UID), Method: "delete",
			ClaimedAt: time.Now().Add(-time.Minute), Outcome: state.RestartClaimed, Reason: "left by a run that died"})
		b, err := state.Encode(st, time.Now())
		must(t, err)
		cm.Data[statestore.DataKey] = string(b)
		_, err = env.Client.CoreV1().ConfigMaps(s.ns).Update(ctx, cm, metav1.UpdateOptions{})
		cancel()
		must(t, err)

		// A slow alert receiver keeps the winner between its claim and its final
		// state write for a second, as a slow webhook or API server would.
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			time.Sleep(time.Second)
		}))
		results := s.race(4, "--webhook-url", slow.URL)
		slow.Close()

		restarted := 0
		for _, r := range results {
			restarted += len(r.report.Restarts)
		}
		if restarted != 1 {
			t.Fatalf("round %d: %d runs completed the one claimed restart; want exactly one", round, restarted)
		}
		if evs := s.events(s.pod.Name, alert.Spec(alert.EventRestarted).Reason); len(evs) != 1 {
			t.Fatalf("round %d: %d restart Events", round, len(evs))
		}
		after, _ := s.state()
		if len(after.Restarts) != 1 || after.Restarts[0].Outcome != state.RestartDone {
			t.Fatalf("round %d: want the one claim settled as done, got %+v", round, after.Restarts)
		}
	}
}

func TestAPIServerUnreachable(t *testing.T) {
	path, err := env.WriteKubeconfig("nowhere", "token")
	must(t, err)
	// Point the kubeconfig at a port nothing listens on.
	raw, err := readFile(path)
	must(t, err)
	must(t, writeFile(path, strings.Replace(raw, env.Config.Host, "https://127.0.0.1:1", 1)))
	r := runCLI(t, "check", "--kubeconfig", path, "--timeout", "20s", "--output", "json")
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("the error does not name the API server:\n%s", r.stderr)
	}
	if r.took > 20*time.Second {
		t.Errorf("took %s, beyond --timeout", r.took)
	}
	t.Logf("unreachable API server: exit 1 after %s", r.took.Round(time.Millisecond))
}

func TestForbiddenNamesVerbAndResource(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	token := serviceAccountToken(t, s.ns, "nobody")
	path, err := env.WriteKubeconfig("nobody-"+s.ns, token)
	must(t, err)
	args := append([]string{"check"}, s.base...)
	args[2] = path // --kubeconfig value
	r := runCLI(t, args...)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	if !regexp.MustCompile(`cannot (get|list) resource "(configmaps|pods)"`).MatchString(r.stderr) {
		t.Errorf("the error does not name verb and resource:\n%s", r.stderr)
	}
}

func TestBadUsageExits2(t *testing.T) {
	for _, args := range [][]string{
		{"check", "--bogus"},
		{"check", "--wedged-for", "soon"},
		{"check", "--output", "yaml"},
		{"check", "--restart-method", "reboot"},
		{"check", "--metrics-port", "0"},
		{"check", "--scheduler-selector", "a in (b"},
		{"frobnicate"},
		{"check", "extra-arg"},
	} {
		r := runCLI(t, args...)
		if r.code != 2 {
			t.Errorf("%v: exit %d, want 2", args, r.code)
		}
		if !strings.Contains(r.stderr, "watchdog:") {
			t.Errorf("%v: no message on stderr", args)
		}
	}
}
