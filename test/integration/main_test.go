// Package integration runs the watchdog against a real kube-apiserver and etcd on
// 127.0.0.1, with loopback HTTP servers standing in for the scheduler's metrics.
package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// The stand-in schedulers serve their metrics on loopback, which the API server
	// refuses to proxy to: every run scrapes directly, as a pod does (auto outside a
	// pod would take the API server's proxy). scrapevia_test.go covers the proxy.
	if err := os.Setenv("WATCHDOG_SCRAPE_VIA", "direct"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration tests need a control plane:", err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
	}
	os.Exit(code)
}

// scenario is one simulated AgentENV installation in its own namespace.
type scenario struct {
	t       testing.TB
	ns      string
	metrics *testenv.MetricsServer
	pod     *corev1.Pod
	// base are flags every run gets; tests add their own.
	base []string
	// skew sets the watchdog's clock off the API server's (zero: the real clock).
	skew time.Duration
}

type layout struct {
	serving int
	page    string
	// started is the scheduler container start; zero is an hour ago.
	started time.Time
	noPod   bool
}

func newScenario(t testing.TB, l layout) *scenario {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "wd")
	must(t, err)
	_, err = testenv.CreateDeployment(ctx, env.Client, ns, "agentenv-scheduler")
	must(t, err)
	must(t, testenv.CreateNodeSlices(ctx, env.Client, ns, "agentenv-nodes", l.serving, 100))
	s := &scenario{t: t, ns: ns, metrics: testenv.NewMetricsServer(l.page)}
	t.Cleanup(s.metrics.Close)
	if !l.noPod {
		s.pod, err = testenv.CreateSchedulerPod(ctx, env.Client, ns, testenv.PodSpec{Name: "agentenv-scheduler-abc12", StartedAt: l.started})
		must(t, err)
	}
	s.base = []string{
		"--kubeconfig", env.Kubeconfig, "--namespace", ns,
		"--metrics-port", strconv.Itoa(s.metrics.Port()),
		"--output", "json", "--log-format", "json",
		"--startup-grace", "1s", "--wedged-for", scenarioWedgedFor.String(), "--confirm-window", "0",
		"--scrape-timeout", "1s", "--timeout", "30s",
	}
	return s
}

// scenarioWedgedFor is the --wedged-for every scenario runs with.
const scenarioWedgedFor = 2 * time.Second

// waitPastWedgedFor lets a wedge seen by one check outlast --wedged-for, so that
// the next check may act on it.
func waitPastWedgedFor() { time.Sleep(scenarioWedgedFor + 100*time.Millisecond) }

// race starts n checks with args at the same instant and returns their results.
func (s *scenario) race(n int, args ...string) []result {
	s.t.Helper()
	s.syncCache()
	results := make([]result, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			results[i] = runCLI(s.t, append(append([]string{"check"}, s.base...), args...)...)
		}(i)
	}
	close(start)
	wg.Wait()
	return results
}

// result is one `watchdog check` run.
type result struct {
	code   int
	report check.Report
	stdout string
	stderr string
	took   time.Duration
}

func (s *scenario) check(args ...string) result {
	s.t.Helper()
	s.syncCache()
	ctx := context.Background()
	if s.skew != 0 {
		ctx = cli.WithClock(ctx, skewedClock{skew: s.skew})
	}
	return runCLIContext(ctx, s.t, append(append([]string{"check"}, s.base...), args...)...)
}

// syncCache makes the API server's watch cache hold everything the test wrote:
// the watchdog lists pods and EndpointSlices, and reads the owners, from that cache; a quorum list
// returns only once the cache has caught up with etcd.
func (s *scenario) syncCache() {
	s.t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := env.Client.CoreV1().Pods(s.ns).List(ctx, metav1.ListOptions{})
	must(s.t, err)
	_, err = env.Client.DiscoveryV1().EndpointSlices(s.ns).List(ctx, metav1.ListOptions{})
	must(s.t, err)
	// The owner chain is read from the cache too (kube.Cached).
	_, err = env.Client.AppsV1().Deployments(s.ns).List(ctx, metav1.ListOptions{})
	must(s.t, err)
	_, err = env.Client.AppsV1().ReplicaSets(s.ns).List(ctx, metav1.ListOptions{})
	must(s.t, err)
}

func runCLI(t testing.TB, args ...string) result {
	t.Helper()
	return runCLIContext(context.Background(), t, args...)
}

// runCLIContext is runCLI under ctx (cli.WithClock: a run on a virtual clock).
func runCLIContext(ctx context.Context, t testing.TB, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := cli.ExecuteContext(ctx, args, &stdout, &stderr)
	r := result{code: code, stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	if outputFormat(args) == "json" && stdout.Len() > 0 && args[0] == "check" {
		// One object on one line: a log pipeline (the chart's default) keeps it whole.
		if lines := strings.Count(stdout.String(), "\n"); lines != 1 {
			t.Fatalf("the JSON report takes %d lines, want 1:\n%s", lines, stdout.String())
		}
		if err := json.Unmarshal(stdout.Bytes(), &r.report); err != nil {
			t.Fatalf("stdout is not one JSON report: %v\n%s", err, stdout.String())
		}
	}
	return r
}

func (r result) expect(t testing.TB, code int, verdict, action string) {
	t.Helper()
	if r.code != code || string(r.report.Verdict) != verdict || string(r.report.Action) != action {
		t.Fatalf("got exit %d %s/%s (%s), want exit %d %s/%s\nstderr:\n%s", r.code, r.report.Verdict, r.report.Action, r.report.Reason, code, verdict, action, r.stderr)
	}
}

func (s *scenario) state() (*state.State, string) {
	s.t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	cm, err := env.Client.CoreV1().ConfigMaps(s.ns).Get(ctx, "agentenv-scheduler-watchdog", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, ""
	}
	must(s.t, err)
	st, err := state.Decode([]byte(cm.Data[statestore.DataKey]))
	must(s.t, err)
	return st, cm.ResourceVersion
}

func (s *scenario) podExists(name string) bool {
	s.t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	_, err := env.Client.CoreV1().Pods(s.ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false
	}
	must(s.t, err)
	return true
}

func (s *scenario) events(object, reason string) []corev1.Event {
	s.t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	list, err := env.Client.CoreV1().Events(s.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + object})
	must(s.t, err)
	var out []corev1.Event
	for _, e := range list.Items {
		if reason == "" || e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// outputFormat is the last --output given, as the command line would read it.
func outputFormat(args []string) string {
	format := "text"
	for i := 0; i+1 < len(args); i++ {
		if args[i] == "--output" || args[i] == "-o" {
			format = args[i+1]
		}
	}
	return format
}
