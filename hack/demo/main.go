// Command demo is the README's "run" command (make demo): it starts a real
// kube-apiserver and etcd on 127.0.0.1, lays out a simulated AgentENV scheduler,
// and runs the real watchdog binary through healthy → wedged → restart →
// recovered, with a local webhook receiver printing the alerts it gets. Then it
// tears everything down.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/alerttest"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/deliver"
)

const ns = "agentenv-system"

func main() {
	bin := flag.String("watchdog", "bin/watchdog", "watchdog binary to run")
	releaseGo := flag.String("release-go", "", "refuse a binary built with another Go than this (make demo passes the Makefile's GOTOOLCHAIN)")
	node := flag.Bool("node", false, "tell the story on the real node hack/cluster.sh started (its environment: hack/cluster.sh env)")
	helm := flag.String("helm", "", "helm binary, for -node")
	flag.Parse()
	if err := checkReleaseGo(*bin, *releaseGo); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
	run := run
	if *node {
		run = func(bin string) error { return runNode(bin, *helm) }
	}
	if err := run(*bin); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// checkReleaseGo refuses a binary whose `watchdog version` names another Go than
// the release toolchain: the demo shows what ships, not what a plain `go build`
// with the machine's Go makes.
func checkReleaseGo(bin, want string) error {
	if want == "" {
		return nil
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", bin, err)
	}
	if !strings.Contains(string(out), ", "+want+" ") {
		return fmt.Errorf("%s was not built with the release toolchain %s (%s): run make build", bin, want, strings.TrimSpace(string(out)))
	}
	return nil
}

func step(format string, args ...any) {
	fmt.Printf("\n%s\n", styled("1", "== "+fmt.Sprintf(format, args...)))
}

// color: ANSI styles only when stdout is a terminal, never with NO_COLOR (no-color.org).
var color = colorOn(os.Getenv("NO_COLOR"), os.Stdout)

func colorOn(noColor string, f *os.File) bool {
	if noColor != "" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// styled wraps text in an ANSI style (1 bold, 2 dim, 35 magenta) when color is on.
func styled(code, text string) string {
	if !color {
		return text
	}
	return "\033[" + code + "m" + text + "\033[0m"
}

func run(bin string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	step("starting kube-apiserver and etcd on 127.0.0.1")
	start := time.Now()
	s := &story{}
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer func() {
		step("tearing down the control plane")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stop:", err)
		}
	}()
	fmt.Printf("API server %s ready in %s\n", env.Config.Host, time.Since(start).Round(100*time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	step("laying out a simulated AgentENV scheduler in %s", ns)
	if _, err := env.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := env.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "agentenv-nodes", Namespace: ns},
		Spec:       corev1.ServiceSpec{ClusterIP: "None", PublishNotReadyAddresses: true, Ports: []corev1.ServicePort{{Name: "node", Port: 8000}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := testenv.CreateDeployment(ctx, env.Client, ns, "agentenv-scheduler"); err != nil {
		return err
	}
	if err := testenv.CreateNodeSlices(ctx, env.Client, ns, "agentenv-nodes", 3, 100); err != nil {
		return err
	}
	healthy, err := testenv.Fixture("scheduler-metrics-healthy.txt")
	if err != nil {
		return err
	}
	dead, err := testenv.Fixture("scheduler-metrics-discovery-dead.txt")
	if err != nil {
		return err
	}
	metrics := testenv.NewMetricsServer(healthy)
	defer metrics.Close()
	pod, err := testenv.CreateSchedulerPod(ctx, env.Client, ns, testenv.PodSpec{Name: "agentenv-scheduler-7d9c4-x2k8p"})
	if err != nil {
		return err
	}
	fmt.Printf("Deployment agentenv-scheduler, pod %s (metrics on %s), 3 serving nodes in EndpointSlices of agentenv-nodes\n", pod.Name, metrics.URL)
	// A stand-in kubelet for the pod's Node: the API server proxies pods/log to it,
	// so the evidence saved before the restart holds the scheduler's last log lines.
	kubelet := testenv.StartKubelet(schedulerLog())
	defer kubelet.Close()
	removeNode, err := kubelet.RegisterNode(ctx, env.Client, "demo-node-1", ns, pod.Name)
	if removeNode != nil {
		defer removeNode()
	}
	if err != nil {
		return err
	}

	receiver, secret := startReceiver(s)
	defer receiver.Close()

	// The simulated scheduler listens on loopback, which the API server will not
	// proxy to: scrape it directly, as the watchdog does in a pod.
	watchdog, capture := runner(bin, env.Kubeconfig, receiver.URL, secret, s,
		"--scrape-via", "direct", "--metrics-port", strconv.Itoa(metrics.Port()))
	s.restarted = pod.Name

	step("1. healthy: the scheduler sees its 3 nodes")
	if err := watchdog("check"); err != nil {
		return err
	}

	step("2. discovery dies: ready drops to 0 and node heartbeats are rejected")
	metrics.SetPage(dead)
	fmt.Println("(demo timings: --startup-grace 5s --wedged-for 1m --confirm-window 10s --sample-interval 2s;")
	// From the flags' own defaults, so the note cannot go stale again.
	fmt.Printf(" production defaults are %s, %s, %s and %s)\n", cli.DefaultStartupGrace, cli.DefaultWedgedFor, cli.DefaultConfirmWindow, cli.DefaultSampleInterval)
	if err := watchdog("check", "--dry-run"); err != nil {
		return err
	}
	step("2b. shadow mode (the first week's setting): the run is live but records a would-restart instead of restarting")
	if err := watchdog("check", "--shadow"); err != nil {
		return err
	}
	step("3. restarts on: the run confirms afresh over the window (a shadow confirmation does not count), then restarts")
	if err := watchdog("check"); err != nil {
		return err
	}
	// The pod is on a Node now: the API server only marks it for deletion, and its
	// kubelet removes it once the container stopped. The stand-in kubelet runs no
	// container, so the demo does that part.
	gone, err := env.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err == nil && gone.DeletionTimestamp == nil {
		return fmt.Errorf("pod %s was not restarted", pod.Name)
	}
	if err == nil {
		zero := int64(0)
		if err := env.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			return err
		}
	}
	fmt.Printf("pod %s is gone\n", pod.Name)

	step("4. the Deployment controller starts a replacement; the new process is in its startup grace")
	metrics.SetPage(healthy)
	s.replacement = "agentenv-scheduler-7d9c4-q7w2m"
	if _, err := testenv.CreateSchedulerPod(ctx, env.Client, ns, testenv.PodSpec{Name: s.replacement, StartedAt: time.Now()}); err != nil {
		return err
	}
	if err := watchdog("check"); err != nil {
		return err
	}

	step("5. past the grace the new scheduler is healthy: recovered")
	time.Sleep(5 * time.Second)
	if err := watchdog("check"); err != nil {
		return err
	}

	step("what the watchdog remembers (watchdog status)")
	if err := watchdog("status"); err != nil {
		return err
	}
	step("what it did and why, newest first (watchdog history)")
	if err := watchdog("history"); err != nil {
		return err
	}
	if err := showEvidence(ctx, env.Client, s, capture); err != nil {
		return err
	}
	events, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	step("Kubernetes Events it left")
	for _, e := range events.Items {
		fmt.Printf("%-8s %-22s %s/%s: %s\n", e.Type, e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message)
	}
	s.countEvents(events.Items)
	step("summary")
	s.writeSummary(os.Stdout, time.Since(start))
	return nil
}

// startReceiver is a local webhook receiver that prints the alerts it gets and
// whether their signatures verify with the secret it returns, and tells s.
func startReceiver(s *story) (*httptest.Server, string) {
	raw := make([]byte, 16)
	_, _ = rand.Read(raw)
	secret := hex.EncodeToString(raw)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		valid := verify([]byte(secret), r, body, time.Now())
		var n alert.Notification
		_ = json.Unmarshal(body, &n)
		s.alert(n.Event, valid)
		fmt.Println(styled("35", fmt.Sprintf("[webhook receiver] %s alert %q (signature valid: %v): %s", strings.ToUpper(n.Severity), n.Event, valid, n.Reason)))
		w.WriteHeader(http.StatusNoContent)
	})), secret
}

// verify is docs/alerts.md's receiver check ("Verifying the signature"), which the tests' receivers use too.
func verify(secret []byte, r *http.Request, body []byte, now time.Time) bool {
	ts, sig := r.Header.Get(deliver.HeaderTimestamp), r.Header.Get(deliver.HeaderSignature)
	return alerttest.Verify(secret, ts, sig, body, now, 5*time.Minute)
}

// runner runs the watchdog binary against the cluster of kubeconfig in the demo's
// namespace, printing its output (run) or returning it (capture); a check also gets
// the demo's timings, the receiver, and scrape, how it reaches the scheduler's metrics.
func runner(bin, kubeconfig, receiverURL, secret string, s *story, scrape ...string) (
	run func(args ...string) error, capture func(args ...string) (string, error)) {
	to := func(out io.Writer, args ...string) error {
		full := append(append([]string{}, args...), "--kubeconfig", kubeconfig, "--namespace", ns, "--log-format", "console")
		if args[0] == "check" {
			full = append(append(full, scrape...), "--cluster-name", "demo",
				"--startup-grace", "5s", "--wedged-for", "1m", "--confirm-window", "10s", "--sample-interval", "2s", "--timeout", "1m")
		}
		cmd := exec.Command(bin, full...)
		if args[0] == "check" {
			cmd.Env = append(os.Environ(), "WATCHDOG_WEBHOOK_URL="+receiverURL+"/alerts", "WATCHDOG_WEBHOOK_SECRET="+secret)
		}
		cmd.Stdout, cmd.Stderr = out, out
		env := ""
		if args[0] == "check" {
			env = "WATCHDOG_WEBHOOK_URL=" + receiverURL + "/alerts WATCHDOG_WEBHOOK_SECRET=<the receiver's> "
		}
		fmt.Println(styled("2", "$ "+env+"watchdog "+strings.Join(full, " ")))
		s.mu.Lock()
		s.runs++
		s.mu.Unlock()
		return cmd.Run()
	}
	return func(args ...string) error { return to(os.Stdout, args...) }, func(args ...string) (string, error) {
		var b strings.Builder
		err := to(&b, args...)
		return b.String(), err
	}
}

// schedulerLog is what the simulated scheduler logged before its watch died.
func schedulerLog() string {
	var b strings.Builder
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for i := 0; i < 240; i++ {
		fmt.Fprintf(&b, "%s INFO heartbeat accepted node=runtime-%d\n", at.Add(time.Duration(i)*time.Second).Format(time.RFC3339), i%3)
	}
	at = at.Add(4 * time.Minute)
	fmt.Fprintf(&b, "%s WARN endpointslice watch: http2: client connection lost\n", at.Format(time.RFC3339))
	fmt.Fprintf(&b, "%s INFO endpointslice informer: watch closed, not re-established\n", at.Add(time.Second).Format(time.RFC3339))
	for i := 2; i < 8; i++ {
		fmt.Fprintf(&b, "%s WARN heartbeat rejected: unknown node node=runtime-%d code=InvalidArgument\n", at.Add(time.Duration(i)*5*time.Second).Format(time.RFC3339), i%3)
	}
	return b.String()
}
