package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
)

var must = testenv.Must

const (
	schedulerName = "agentenv-scheduler"
	nodesName     = "agentenv-node"
	nodesService  = "agentenv-nodes"
	// The stand-in's clock: 4 scheduler seconds a second, so its "ready drops 40 s
	// after the roll" takes 10 s and the e2e stays within its budget.
	simSpeed = "4"
	// The scheduler stand-in's control port (hack/schedsim).
	controlPort = 9190
)

// images are the digests pushed to the node's registry, once per test binary.
type images struct {
	watchdogRepo, watchdogDigest string
	sim                          string // the stand-in's image, by digest
	chartRef, chartVersion       string
}

var (
	pushed     images
	pushedOnce sync.Once
	pushErr    error
)

// pushImages builds the watchdog's image (linux/amd64, as `make image` builds it)
// and the scheduler stand-in's, and pushes them and the packaged chart to the
// node's registry.
func pushImages(t *testing.T) images {
	t.Helper()
	pushedOnce.Do(func() { pushed, pushErr = buildAndPush(t) })
	must(t, pushErr)
	return pushed
}

func buildAndPush(t *testing.T) (images, error) {
	var im images
	dir, err := os.MkdirTemp("", "watchdog-e2e-")
	if err != nil {
		return im, err
	}
	defer os.RemoveAll(dir)
	release := filepath.Join(clusterBin, "release")
	created := time.Unix(0, 0).UTC().Format(time.RFC3339)
	if out, err := tryCommand(t, release, "image", "--out", dir+"/image", "--base", "local", "--version", "e2e", "--revision", "e2e",
		"--created", created, "--binary", "linux/amd64="+watchdogBin); err != nil {
		return im, fmt.Errorf("release image: %v\n%s", err, out)
	}
	im.watchdogRepo = registry + "/agentenv/scheduler-watchdog"
	out, err := tryCommand(t, release, "push", "--layout", dir+"/image", "--ref", im.watchdogRepo+":e2e", "--insecure")
	if err != nil {
		return im, fmt.Errorf("release push: %v\n%s", err, out)
	}
	im.watchdogDigest = strings.TrimSpace(out)
	simRepo := registry + "/agentenv/scheduler-sim"
	out, err = tryCommand(t, release, "binary-image", "--binary", filepath.Join(clusterBin, "schedsim"), "--cmd", "scheduler", "--ref", simRepo+":e2e", "--insecure")
	if err != nil {
		return im, fmt.Errorf("release binary-image: %v\n%s", err, out)
	}
	im.sim = simRepo + "@" + strings.TrimSpace(out)
	out, err = tryCommand(t, helmBin, "package", filepath.Join(root, "charts", "agentenv-scheduler-watchdog"), "--destination", dir)
	if err != nil {
		return im, fmt.Errorf("helm package: %v\n%s", err, out)
	}
	pkgs, _ := filepath.Glob(dir + "/agentenv-scheduler-watchdog-*.tgz")
	if len(pkgs) != 1 {
		return im, fmt.Errorf("helm package wrote %v", pkgs)
	}
	im.chartVersion = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(pkgs[0]), "agentenv-scheduler-watchdog-"), ".tgz")
	if out, err := tryCommand(t, helmBin, "push", pkgs[0], "oci://"+registry+"/charts", "--plain-http"); err != nil {
		return im, fmt.Errorf("helm push: %v\n%s", err, out)
	}
	im.chartRef = "oci://" + registry + "/charts/agentenv-scheduler-watchdog"
	return im, nil
}

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

// layOutScheduler creates what the watchdog watches, as pods the kubelet runs: the
// scheduler stand-in's Deployment (one replica) and a few simulated runtime nodes
// behind the agentenv-nodes Service, whose EndpointSlices the real controller
// keeps. It waits until all are Ready.
func layOutScheduler(t *testing.T, ns, simImage string) {
	t.Helper()
	ctx := context.Background()
	nonRoot, ro, no := true, true, false
	secure := &corev1.SecurityContext{RunAsNonRoot: &nonRoot, ReadOnlyRootFilesystem: &ro, AllowPrivilegeEscalation: &no,
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	grace := int64(5)
	deployment := func(name string, labels map[string]string, replicas int32, c corev1.Container) *appsv1.Deployment {
		c.Image, c.SecurityContext = simImage, secure
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{TerminationGracePeriodSeconds: &grace, Containers: []corev1.Container{c}},
				},
			},
		}
	}
	probe := func(path string, port int) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt(port)}}, PeriodSeconds: 1}
	}
	nodeLabels := map[string]string{"app.kubernetes.io/name": nodesName}
	_, err := client.AppsV1().Deployments(ns).Create(ctx, deployment(nodesName, nodeLabels, 3, corev1.Container{
		Name: "node", Args: []string{"node"}, ReadinessProbe: probe("/healthz", 8000),
		Ports: []corev1.ContainerPort{{Name: "node", ContainerPort: 8000}},
	}), metav1.CreateOptions{})
	must(t, err)
	_, err = client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: nodesService, Namespace: ns},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: nodeLabels,
			Ports: []corev1.ServicePort{{Name: "node", Port: 8000}}},
	}, metav1.CreateOptions{})
	must(t, err)
	schedLabels := map[string]string{"app.kubernetes.io/name": schedulerName}
	_, err = client.AppsV1().Deployments(ns).Create(ctx, deployment(schedulerName, schedLabels, 1, corev1.Container{
		Name: "scheduler", Args: []string{"scheduler", "--nodes", "3", "--speed", simSpeed}, ReadinessProbe: probe("/metrics", 9101),
		Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9101}, {Name: "control", ContainerPort: controlPort}},
	}), metav1.CreateOptions{})
	must(t, err)
	waitDeploymentReady(t, ns, nodesName, 3)
	waitDeploymentReady(t, ns, schedulerName, 1)
}

// waitDeploymentReady waits until the Deployment's pods are Ready, as the kubelet
// reports them.
func waitDeploymentReady(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	waitFor(t, 2*time.Minute, fmt.Sprintf("Deployment %s/%s: %d ready", ns, name, replicas), func() bool {
		d, err := client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == replicas &&
			d.Status.UpdatedReplicas == replicas && d.Status.Replicas == replicas
	})
}

// waitFor polls cond every second (the cluster's controllers act in seconds; a
// finer poll only loads the API server) until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(time.Second)
	}
}

// schedulerPod is the scheduler's one running, Ready pod.
func schedulerPod(t *testing.T, ns string) *corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + schedulerName})
	must(t, err)
	var ready []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			ready = append(ready, p)
		}
	}
	if len(ready) != 1 {
		t.Fatalf("want one Ready scheduler pod, found %d of %d", len(ready), len(pods.Items))
	}
	return &ready[0]
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// control tells the scheduler stand-in in pod p to misbehave, over the pod network.
func control(t *testing.T, p *corev1.Pod, path string) {
	t.Helper()
	url := fmt.Sprintf("http://%s/%s", net.JoinHostPort(p.Status.PodIP, fmt.Sprint(controlPort)), path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	must(t, err)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST %s: %s", url, resp.Status)
	}
}

// sink is a webhook receiver on the bridge's host address, which the Job pods reach
// over the pod network; it checks each request's signature.
type sink struct {
	URL    string
	secret string
	mu     sync.Mutex
	got    []alert.Notification
	bad    []string
}

func newSink(t *testing.T) *sink {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0"))
	must(t, err)
	s := &sink{URL: "http://" + l.Addr().String() + "/alerts", secret: hex.EncodeToString([]byte(t.Name()))}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if !alert.Verify([]byte(s.secret), r.Header.Get(alert.HeaderTimestamp), r.Header.Get(alert.HeaderSignature), body, time.Now(), 5*time.Minute) {
			s.bad = append(s.bad, "bad signature: "+string(body))
		}
		var n alert.Notification
		if err := json.Unmarshal(body, &n); err != nil {
			s.bad = append(s.bad, fmt.Sprintf("%v: %s", err, body))
		}
		s.got = append(s.got, n)
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
