package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// faultScenario is a wedged scenario whose watchdog talks to the API server
// through a fault-injecting proxy. Its runs use --timeout 3s, which is also how
// long a restart claim protects a run that may still be acting.
type faultScenario struct {
	*scenario
	proxy *testenv.Proxy
}

func newFaultScenario(t *testing.T, page string) *faultScenario {
	t.Helper()
	s := newScenario(t, layout{serving: 3, page: page})
	proxy := s.proxied(t)
	s.base = append(s.base, "--timeout", "3s", "--api-timeout", "1s")
	return &faultScenario{scenario: s, proxy: proxy}
}

// wedgedAndDue runs once (wait) and waits past --wedged-for, so that the next run
// restarts.
func (f *faultScenario) wedgedAndDue(t *testing.T) {
	t.Helper()
	f.check().expect(t, 0, "wedged", "wait")
	waitPastWedgedFor()
}

func isStateWrite(r *http.Request) bool {
	return r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/configmaps/agentenv-scheduler-watchdog")
}

func isPodDelete(r *http.Request) bool {
	return r.Method == http.MethodDelete && strings.Contains(r.URL.Path, "/pods/")
}

func (f *faultScenario) restarts(t *testing.T) []state.Restart {
	t.Helper()
	st, _ := f.state()
	return st.Restarts
}

// releaseDeadHolder deletes the pass Lease a run left held when the API server
// went away under it: it would expire within its 15 s (a dead holder costs at most
// the Lease's duration), which these tests do not wait out.
func releaseDeadHolder(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	if err := env.Client.CoordinationV1().Leases(ns).Delete(ctx, "agentenv-scheduler-watchdog", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func TestFaultAPIGoneBetweenClaimAndDelete(t *testing.T) {
	f := newFaultScenario(t, fixture(t, "scheduler-metrics-discovery-dead.txt"))
	f.wedgedAndDue(t)
	// The claim is written; from then on the API server is gone.
	var claimed atomic.Bool
	f.proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if claimed.Load() {
			return &testenv.Fault{Drop: true}
		}
		if isStateWrite(r) {
			claimed.Store(true)
		}
		return nil
	})
	r := f.check()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1 (the restart could not be carried out)\n%s", r.code, r.stderr)
	}
	f.proxy.SetFault(nil)
	releaseDeadHolder(t, f.ns)
	if !f.podExists(f.pod.Name) {
		t.Fatal("the pod was deleted although the API server was gone")
	}
	if rs := f.restarts(t); len(rs) != 1 || rs[0].Outcome != state.RestartClaimed {
		t.Fatalf("want the claim left behind, got %+v", rs)
	}

	// Right away, another run sees a fresh claim: the claiming run may still act.
	blocked := f.check()
	blocked.expect(t, 0, "wedged", "blocked")
	if !strings.Contains(blocked.report.Reason, "may still be acting") {
		t.Errorf("reason %q", blocked.report.Reason)
	}
	// Past the claim timeout, the next run completes that same restart.
	time.Sleep(3 * time.Second)
	done := f.check()
	done.expect(t, 0, "wedged", "restart")
	if f.podExists(f.pod.Name) {
		t.Fatal("the claimed restart was not completed")
	}
	rs := f.restarts(t)
	if len(rs) != 1 || rs[0].Outcome != state.RestartDone {
		t.Fatalf("want one restart, done; got %+v", rs)
	}
}

func TestFaultAPIGoneBetweenDeleteAndStateWrite(t *testing.T) {
	f := newFaultScenario(t, fixture(t, "scheduler-metrics-discovery-dead.txt"))
	f.wedgedAndDue(t)
	var deleted atomic.Bool
	f.proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if isPodDelete(r) {
			deleted.Store(true)
			return nil
		}
		if deleted.Load() {
			return &testenv.Fault{Drop: true}
		}
		return nil
	})
	r := f.check()
	if r.code != 1 || !strings.Contains(r.stderr, "write state") {
		t.Fatalf("exit %d, want 1 naming the state write\n%s", r.code, r.stderr)
	}
	f.proxy.SetFault(nil)
	releaseDeadHolder(t, f.ns)
	if f.podExists(f.pod.Name) {
		t.Fatal("the delete did not happen")
	}
	if rs := f.restarts(t); len(rs) != 1 || rs[0].Outcome != state.RestartClaimed {
		t.Fatalf("want the claim left behind, got %+v", rs)
	}
	// The replacement pod comes up; the next run settles the claim as done and
	// does not restart the newcomer.
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := testenv.CreateSchedulerPod(ctx, env.Client, f.ns, testenv.PodSpec{Name: "agentenv-scheduler-new", StartedAt: time.Now()})
	must(t, err)
	f.metrics.SetPage(fixture(t, "scheduler-metrics-healthy.txt"))
	// A startup grace that a loaded machine cannot outrun between creating the
	// pod and the check: the newcomer must be judged starting.
	next := f.check("--startup-grace", "1m")
	next.expect(t, 0, "starting", "none")
	rs := f.restarts(t)
	if len(rs) != 1 || rs[0].Outcome != state.RestartDone {
		t.Fatalf("want the one restart settled as done, got %+v", rs)
	}
	if !f.podExists("agentenv-scheduler-new") {
		t.Fatal("the replacement was restarted")
	}
}

func TestFaultConflictStormOnState(t *testing.T) {
	f := newFaultScenario(t, fixture(t, "scheduler-metrics-discovery-dead.txt"))
	f.wedgedAndDue(t)
	// Another writer bumps an annotation of the state ConfigMap as fast as it can,
	// preserving its data (resourceVersion-guarded, like the watchdog).
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var bumps atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ctx.Err() == nil; i++ {
			cm, err := env.Client.CoreV1().ConfigMaps(f.ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
			if err != nil {
				continue
			}
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations["storm"] = fmt.Sprint(i)
			if _, err := env.Client.CoreV1().ConfigMaps(f.ns).Update(ctx, cm, metav1.UpdateOptions{}); err == nil {
				bumps.Add(1)
			}
		}
	}()
	var results []result
	for i := 0; i < 3; i++ {
		results = append(results, f.check())
	}
	cancel()
	wg.Wait()
	restarted := 0
	for _, r := range results {
		if r.code != 0 && !strings.Contains(r.stderr, "conflict") && !strings.Contains(r.stderr, "changed since it was read") {
			t.Fatalf("a run failed for another reason than the storm: exit %d\n%s", r.code, r.stderr)
		}
		restarted += len(r.report.Restarts)
	}
	after := f.check()
	restarted += len(after.report.Restarts)
	rs := f.restarts(t)
	t.Logf("%d competing writes; runs exited %d %d %d %d; restarts %d", bumps.Load(), results[0].code, results[1].code, results[2].code, after.code, restarted)
	if restarted != 1 || len(rs) != 1 || rs[0].Outcome != state.RestartDone {
		t.Fatalf("want exactly one restart recorded as done, got %d carried out and %+v", restarted, rs)
	}
	if bumps.Load() == 0 {
		t.Fatal("the storm never wrote: the test proves nothing")
	}
}

func TestFaultPodDeletedByOthersMidRun(t *testing.T) {
	f := newFaultScenario(t, fixture(t, "scheduler-metrics-discovery-dead.txt"))
	f.wedgedAndDue(t)
	f.proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if !isPodDelete(r) {
			return nil
		}
		return &testenv.Fault{Before: func() {
			ctx, cancel := testenv.Ctx()
			defer cancel()
			zero := int64(0)
			must(t, env.Client.CoreV1().Pods(f.ns).Delete(ctx, f.pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
		}}
	})
	r := f.check()
	r.expect(t, 0, "wedged", "restart")
	if len(r.report.Restarts) != 1 || r.report.Restarts[0].Outcome != state.RestartDone || !strings.Contains(r.report.Restarts[0].Detail, "already gone") {
		t.Fatalf("a 404 on delete means done: %+v", r.report.Restarts)
	}
}

func TestFaultForbiddenDelete(t *testing.T) {
	f := newFaultScenario(t, fixture(t, "scheduler-metrics-discovery-dead.txt"))
	f.wedgedAndDue(t)
	f.proxy.SetFault(func(r *http.Request) *testenv.Fault {
		if isPodDelete(r) {
			return &testenv.Fault{Status: http.StatusForbidden, Reason: metav1.StatusReasonForbidden}
		}
		return nil
	})
	r := f.check()
	if r.code != 1 || !strings.Contains(r.stderr, "delete pod") || !strings.Contains(strings.ToLower(r.stderr), "forbidden") {
		t.Fatalf("exit %d, want 1 naming the refused delete\n%s", r.code, r.stderr)
	}
	if !f.podExists(f.pod.Name) {
		t.Fatal("pod gone")
	}
	rs := f.restarts(t)
	if len(rs) != 1 || rs[0].Outcome != state.RestartFailed {
		t.Fatalf("want one failed restart, got %+v", rs)
	}
	if !sentAlert(r, "restart-failed") {
		t.Errorf("no restart-failed alert: %+v", r.report.Alerts)
	}
}

func TestFaultAPIThrottlesThenAnswers(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		t.Run(fmt.Sprint(code), func(t *testing.T) {
			f := newFaultScenario(t, fixture(t, "scheduler-metrics-healthy.txt"))
			var refused atomic.Int64
			f.proxy.SetFault(func(r *http.Request) *testenv.Fault {
				if refused.Add(1) <= 3 {
					return &testenv.Fault{Status: code, RetryAfter: "1"}
				}
				return nil
			})
			start := time.Now()
			r := f.check("--timeout", "20s", "--api-timeout", "10s")
			r.expect(t, 0, "healthy", "none")
			if took := time.Since(start); took < time.Second {
				t.Errorf("took %s: the Retry-After was not honoured", took)
			}
		})
	}
}

func TestFaultHostileMetricsServers(t *testing.T) {
	page := fixture(t, "scheduler-metrics-healthy.txt")
	cases := []struct {
		name    string
		handler http.HandlerFunc
		args    []string
		verdict string
		reason  string
	}{
		{"trickles one byte a second", func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < len(page); i++ {
				if _, err := w.Write([]byte{page[i]}); err != nil {
					return
				}
				w.(http.Flusher).Flush()
				select {
				case <-time.After(time.Second):
				case <-r.Context().Done():
					return
				}
			}
		}, []string{"--scrape-timeout", "2s"}, "unknown", "timeout"},
		{"100 MiB page", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, page)
			chunk := []byte(strings.Repeat("go_gc_filler_series{id=\"x\"} 1\n", 1<<15))
			for sent := 0; sent < 100<<20; sent += len(chunk) {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, nil, "unknown", "exceeds 16777216 bytes"},
		{"a million foreign series within the cap", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, page)
			for i := 0; i < 1_000_000; i++ {
				if _, err := fmt.Fprintf(w, "other_series{i=\"%d\"} 1\n", i); err != nil {
					return
				}
			}
			// Generating and reading 20 MB takes ~0.3 s alone, seconds on a loaded
			// machine: this case is about the cap, not the scrape timeout.
		}, []string{"--metrics-max-bytes", "134217728", "--scrape-timeout", "10s"}, "healthy", "ready 3"},
		{"a million watched series", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, page)
			for i := 0; i < 1_000_000; i++ {
				if _, err := fmt.Fprintf(w, "agentenv_scheduler_rpc_duration_seconds_count{rpc=\"R%d\",status=\"ok\"} 1\n", i); err != nil {
					return
				}
			}
		}, []string{"--metrics-max-bytes", "134217728"}, "unknown", "too many series"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newScenario(t, layout{serving: 3, page: page})
			s.metrics.SetHandler(tc.handler)
			start := time.Now()
			r := s.check(append([]string{"--timeout", "20s"}, tc.args...)...)
			r.expect(t, 0, tc.verdict, "none")
			if !strings.Contains(r.report.Reason, tc.reason) {
				t.Errorf("reason %q lacks %q", r.report.Reason, tc.reason)
			}
			t.Logf("%s: %s in %s", tc.name, r.report.Verdict, time.Since(start).Round(10*time.Millisecond))
		})
	}
}

func TestFaultClockSkew(t *testing.T) {
	// The node's clock runs an hour ahead: unknown until the watchdog has watched
	// the process for --startup-grace (1 s here) by its own clock, then judged
	// with that age and a warning, so that it is not blind for the hour.
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt"), started: time.Now().Add(time.Hour)})
	r := s.check()
	r.expect(t, 0, "unknown", "none")
	if !strings.Contains(r.report.Reason, "clock skew") {
		t.Errorf("reason %q", r.report.Reason)
	}
	time.Sleep(1100 * time.Millisecond)
	r = s.check()
	r.expect(t, 0, "wedged", "wait")
	if !slices.ContainsFunc(r.report.Warnings, func(w string) bool { return strings.Contains(w, "clock runs ahead") }) {
		t.Errorf("warnings %q do not name the skew", r.report.Warnings)
	}
	if !s.podExists(s.pod.Name) {
		t.Fatal("restarted a pod on its first judged sight")
	}
}

// skewedClock is the real clock read skew off: the watchdog's node clock
// disagreeing with the API server's and the kubelet's.
type skewedClock struct {
	clock.RealClock
	skew time.Duration
}

func (c skewedClock) Now() time.Time                  { return time.Now().Add(c.skew) }
func (c skewedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// The watchdog's clock runs 25 s ahead of the API server's (and the kubelet's), or
// 25 s behind: a restart whose replacement wedges the same way is still recognised
// (restart-ineffective, back-off), its gap said by the API server's clock, because
// the restart's time by the API server (the deleted pod's deletionTimestamp) is
// compared with the replacement's creationTimestamp. Checked without that
// comparison: ahead, the claim (by the watchdog's clock) is dated after the
// replacement started, which is then not recognised and restarted again; behind,
// the replacement is still recognised, but the gap is said across two clocks (24s). decide's
// TestReplacementRecognisedDespiteClockSkew, on a real API server.
func TestFaultClockSkewReplacementRecognised(t *testing.T) {
	for _, skew := range []time.Duration{25 * time.Second, -25 * time.Second} {
		t.Run("watchdog clock "+skew.String(), func(t *testing.T) {
			s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-discovery-dead.txt")})
			s.skew = skew
			r := restartDoesNotHeal(t, s, func() {}, "--restart-backoff", "2m")
			ineffective := r.report.Targets[0].Ineffective
			m := regexp.MustCompile(`its replacement agentenv-scheduler-r1 started (\d+)s later`).FindStringSubmatch(ineffective)
			if !strings.Contains(r.report.Reason, "did not heal; backing off") || m == nil {
				t.Fatalf("reason %q, ineffective %q", r.report.Reason, ineffective)
			}
			if gap, _ := strconv.Atoi(m[1]); gap > 2 {
				t.Errorf("the replacement started %ds after the restart, by two clocks: %s", gap, ineffective)
			}
			st, _ := s.state()
			if st.Backoff == nil || st.Backoff.Ineffective != 1 || st.Backoff.NotBefore.Sub(st.Backoff.LastRestartAt) != 2*time.Minute {
				t.Errorf("back-off %+v, want one ineffective restart and 2m", st.Backoff)
			}
		})
	}
}

func TestFaultStateNearObjectLimit(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	// Someone (an older or buggy writer) left ~900 KiB of history behind.
	big := state.New()
	for i := 0; i < 300; i++ {
		big.Restarts = append(big.Restarts, state.Restart{Pod: "old", UID: fmt.Sprintf("uid-%d", i), Method: "delete",
			ClaimedAt: time.Now().Add(-time.Duration(i) * time.Minute), Outcome: state.RestartDone, Reason: strings.Repeat("r", 3000)})
	}
	raw, err := json.Marshal(big) // unbounded on purpose: Encode would prune
	must(t, err)
	if len(raw) < 800<<10 {
		t.Fatalf("seed is only %d bytes", len(raw))
	}
	ctx, cancel := testenv.Ctx()
	defer cancel()
	writeStateRaw(t, ctx, s.ns, string(raw))

	s.check().expect(t, 0, "healthy", "none")
	cm, err := env.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	must(t, err)
	size := len(cm.Data[statestore.DataKey])
	st, err := state.Decode([]byte(cm.Data[statestore.DataKey]))
	must(t, err)
	t.Logf("state shrank from %d to %d bytes, %d restarts kept", len(raw), size, len(st.Restarts))
	if size > 256<<10 || len(st.Restarts) == 0 || len(st.Restarts) > state.MaxRestarts {
		t.Fatalf("state not bounded: %d bytes, %d restarts", size, len(st.Restarts))
	}
	newest := st.Restarts[len(st.Restarts)-1]
	if newest.UID != "uid-0" {
		t.Errorf("the newest restart must be kept, last is %s", newest.UID)
	}
}
