package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/alerttest"
	"github.com/agentenv/watchdog/internal/realnode"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/deliver"
)

var must = testenv.Must

// pushImages pushes the watchdog's image, the stand-in's and the chart to the
// node's registry, once per test binary.
func pushImages(t *testing.T) realnode.Images {
	t.Helper()
	pushedOnce.Do(func() {
		home := filepath.Join(tmpDir, "helm", "push")
		_, bundle, err := receiverTLS(tmpDir)
		if err != nil {
			pushErr = err
			return
		}
		pushed, pushErr = cluster.Push(context.Background(), root, watchdogBin, bundle, helmBin, helmEnv(home))
	})
	must(t, pushErr)
	return pushed
}

var (
	pushed     realnode.Images
	pushedOnce sync.Once
	pushErr    error
)

// createNamespace makes a namespace for one test and deletes it at the end (its
// pods really stop: the kubelet runs them).
func createNamespace(t *testing.T, name string) string {
	t.Helper()
	ctx := context.Background()
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	must(t, err)
	t.Cleanup(func() {
		if t.Failed() {
			dump(t, name)
		}
		_, _ = tryCommand(t, helmBin, "uninstall", "watchdog", "--namespace", name, "--ignore-not-found")
		_ = client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// dump logs what a failed test leaves: pods, events, Jobs.
func dump(t *testing.T, ns string) {
	t.Helper()
	out, _ := tryCommand(t, filepath.Join(clusterBin, "kubectl"), "-n", ns, "get", "pods,jobs,cronjobs,deployments,endpointslices", "-o", "wide")
	t.Logf("kubectl get -n %s:\n%s", ns, out)
	out, _ = tryCommand(t, filepath.Join(clusterBin, "kubectl"), "-n", ns, "get", "events", "--sort-by", ".lastTimestamp")
	t.Logf("events in %s:\n%s", ns, out)
}

// waitFor is realnode.Poll bounded by timeout, failing the test.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	must(t, realnode.Poll(ctx, what, cond))
}

// schedulerPod is the scheduler's one running, Ready pod.
func schedulerPod(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	ready, err := cluster.SchedulerPods(context.Background(), ns)
	must(t, err)
	if len(ready) != 1 {
		t.Fatalf("want one Ready scheduler pod, found %d", len(ready))
	}
	return &ready[0]
}

// sink is a webhook receiver on the bridge's host address, which the Job pods reach
// over the pod network, over TLS (receiverTLS); it checks each request's signature.
type sink struct {
	URL    string
	secret string
	mu     sync.Mutex
	got    []alert.Notification
	at     []time.Time // when each of got came
	bad    []string
}

func newSink(t *testing.T) *sink {
	t.Helper()
	cfg, _, err := receiverTLS(tmpDir)
	must(t, err)
	l, err := net.Listen("tcp", net.JoinHostPort(cluster.HostIP, "0"))
	must(t, err)
	l = tls.NewListener(l, cfg)
	s := &sink{URL: "https://" + l.Addr().String() + "/alerts", secret: hex.EncodeToString([]byte(t.Name()))}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !alerttest.Verify([]byte(s.secret), r.Header.Get(deliver.HeaderTimestamp), r.Header.Get(deliver.HeaderSignature), body, time.Now(), 5*time.Minute) {
			s.bad = append(s.bad, "bad signature: "+string(body))
		}
		var n alert.Notification
		if err := json.Unmarshal(body, &n); err != nil {
			s.bad = append(s.bad, fmt.Sprintf("%v: %s", err, body))
		}
		s.got = append(s.got, n)
		s.at = append(s.at, time.Now())
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// events is what the sink got, by event name, in order; it fails on a bad request.
func (s *sink) events(t *testing.T) []string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		t.Fatalf("the webhook sink got bad requests: %q", s.bad)
	}
	var out []string
	for _, n := range s.got {
		out = append(out, n.Event)
	}
	return out
}

// received is when the sink first got event; zero if it never did.
func (s *sink) received(event string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, n := range s.got {
		if n.Event == event {
			return s.at[i]
		}
	}
	return time.Time{}
}

// replacementReady waits for the scheduler's pod that replaces old (restarted at
// restartAt) to run and be Ready, logs both steps' times under prefix (the
// kubelet's times are whole seconds), and returns its name and when it became Ready.
func replacementReady(t *testing.T, ns, old string, restartAt time.Time, prefix string) (string, time.Time) {
	t.Helper()
	var replacement string
	var readyAt time.Time
	waitFor(t, 2*time.Minute, "the scheduler's replacement pod Ready", func() bool {
		pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + realnode.Scheduler})
		if err != nil {
			return false
		}
		for _, p := range pods.Items {
			if p.Name != old && p.DeletionTimestamp == nil && realnode.PodReady(&p) && len(p.Status.ContainerStatuses) == 1 &&
				p.Status.ContainerStatuses[0].State.Running != nil {
				replacement = p.Name
				timing(t, prefix+"restart -> replacement container started", p.Status.ContainerStatuses[0].State.Running.StartedAt.Sub(restartAt))
				for _, c := range p.Status.Conditions {
					if c.Type == corev1.PodReady {
						readyAt = c.LastTransitionTime.Time
					}
				}
				return true
			}
		}
		return false
	})
	timing(t, prefix+"restart -> replacement Ready", readyAt.Sub(restartAt))
	return replacement, readyAt
}

// jobRun is one Job of the CronJob, finished, with what its pod logged.
type jobRun struct {
	job    batchv1.Job
	pod    string
	log    string
	report check.Report
	// reports counts the log's lines that are a run's report.
	reports int
	// nonJSON are the log's lines that are not JSON.
	nonJSON []string
}

// jobs follows the CronJob's finished Jobs, oldest first, each once.
type jobs struct {
	ns   string
	seen map[string]bool
}

func newJobs(ns string) *jobs { return &jobs{ns: ns, seen: map[string]bool{}} }

// next waits for the next finished Job not seen yet and returns it.
func (j *jobs) next(t *testing.T, timeout time.Duration) jobRun {
	t.Helper()
	var r jobRun
	waitFor(t, timeout, "the next finished Job in "+j.ns, func() bool {
		list, err := client.BatchV1().Jobs(j.ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=watchdog"})
		if err != nil {
			return false
		}
		slices.SortFunc(list.Items, func(a, b batchv1.Job) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
		for _, job := range list.Items {
			if j.seen[job.Name] || job.Status.CompletionTime == nil && job.Status.Failed == 0 {
				continue
			}
			j.seen[job.Name] = true
			r = readRun(t, job)
			return true
		}
		return false
	})
	return r
}

// readRun reads a finished Job's pod log through the API server and the kubelet.
func readRun(t *testing.T, job batchv1.Job) jobRun {
	t.Helper()
	ctx := context.Background()
	r := jobRun{job: job}
	pods, err := client.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	must(t, err)
	if len(pods.Items) != 1 {
		t.Fatalf("Job %s has %d pods, want 1", job.Name, len(pods.Items))
	}
	r.pod = pods.Items[0].Name
	raw, err := client.CoreV1().Pods(job.Namespace).GetLogs(r.pod, &corev1.PodLogOptions{Container: "watchdog"}).DoRaw(ctx)
	must(t, err)
	r.log = string(raw)
	sc := bufio.NewScanner(strings.NewReader(r.log))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		var fields map[string]json.RawMessage
		if json.Unmarshal([]byte(line), &fields) != nil {
			r.nonJSON = append(r.nonJSON, line)
			continue
		}
		if _, ok := fields["verdict"]; !ok {
			continue
		}
		if _, ok := fields["targets"]; !ok {
			continue
		}
		r.reports++
		must(t, json.Unmarshal([]byte(line), &r.report))
	}
	t.Logf("Job %s (pod %s): verdict %s, action %s, %d restarts, alerts %v: %s", job.Name, r.pod, r.report.Verdict, r.report.Action,
		len(r.report.Restarts), deliveries(r.report), r.report.Reason)
	return r
}

func deliveries(r check.Report) []string {
	var out []string
	for _, d := range r.Alerts {
		out = append(out, d.Event+"→"+d.Sink)
	}
	return out
}
