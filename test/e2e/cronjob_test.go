package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/realnode"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/evidence"
	"github.com/agentenv/watchdog/pkg/kube"
)

// installArgs is `helm install` from oci:// at the pushed digests, CronJob every
// minute, the decision's timings shortened so a wedge is confirmed within two
// runs (production defaults: values.yaml).
func installArgs(im realnode.Images, ns string, s *sink, extra ...string) []string {
	args := []string{"install", "watchdog", im.ChartRef, "--version", im.ChartVersion, "--plain-http",
		"--namespace", ns, "--wait", "--timeout", "2m",
		"--set", "image.repository=" + im.WatchdogRepo, "--set", "image.digest=" + im.WatchdogDigest,
		"--set", "cronjob.schedule=*/1 * * * *",
		"--set", "cronjob.activeDeadlineSeconds=55", "--set", "run.timeout=45s",
		"--set", "decision.startupGrace=20s", "--set", "decision.wedgedFor=30s",
		"--set", "decision.confirmWindow=10s", "--set", "decision.sampleInterval=2s",
		"--set", "alerts.clusterName=e2e", "--set", "alerts.webhookURL=" + s.URL, "--set", "alerts.webhookSecret=" + s.secret,
	}
	return append(args, extra...)
}

// timing prints an e2e step's duration in a form docs/performance.md quotes.
func timing(t *testing.T, step string, d time.Duration) {
	t.Helper()
	line := fmt.Sprintf("e2e timing: %7.1fs  %s", d.Seconds(), step)
	t.Log(line)
	if f := os.Getenv("WATCHDOG_E2E_TIMINGS"); f != "" {
		if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprintln(fh, line)
			fh.Close()
		}
	}
}

// TestCronJobOnARealNode is the product as it runs: the chart installed from the
// registry, its CronJob's Jobs run by the kubelet every minute; a healthy scheduler
// pod is judged healthy over the pod network; `helm test` passes; then the
// scheduler loses its node discovery while the nodes roll, a Job restarts its pod,
// the Deployment's replacement is started by the kubelet, and a later Job reports
// the recovery, with the evidence bundle holding the scheduler's real log.
func TestCronJobOnARealNode(t *testing.T) {
	needNode(t)
	t.Parallel()
	begin := time.Now()
	im := pushImages(t)
	timing(t, "images and chart pushed", time.Since(begin))
	ns := createNamespace(t, "agentenv-system")
	must(t, cluster.LayOut(context.Background(), ns, im.Sim))
	timing(t, "scheduler and 3 nodes Ready", time.Since(begin))
	s := newSink(t)
	// The first run judges a scheduler past its startup grace (20 s here).
	started := schedulerPod(t, ns).Status.ContainerStatuses[0].State.Running.StartedAt.Time
	time.Sleep(time.Until(started.Add(21 * time.Second)))
	helm(t, installArgs(im, ns, s)...)
	installed := time.Now()

	// ---- healthy: the first Job, as `kubectl logs` shows it
	j := newJobs(ns)
	first := j.next(t, 3*time.Minute)
	timing(t, "install -> first Job finished", time.Since(installed))
	if first.job.Status.Succeeded != 1 {
		t.Fatalf("the first Job did not succeed: %+v\n%s", first.job.Status, first.log)
	}
	logs := kubectl(t, "logs", "-n", ns, "job/"+first.job.Name, "-c", "watchdog")
	if first.reports != 1 || len(first.nonJSON) > 0 {
		t.Errorf("kubectl logs of Job %s: want one JSON report (and only JSON), got %d reports, non-JSON %q:\n%s", first.job.Name, first.reports, first.nonJSON, logs)
	}
	if !strings.Contains(logs, `"verdict":"healthy"`) || first.report.Verdict != "healthy" {
		t.Errorf("Job %s: verdict %q, want healthy:\n%s", first.job.Name, first.report.Verdict, logs)
	}
	sched := schedulerPod(t, ns)
	if len(first.report.Targets) != 1 || first.report.Targets[0].Pod != sched.Name {
		t.Errorf("Job %s judged %+v, want the scheduler pod %s", first.job.Name, first.report.Targets, sched.Name)
	}
	if first.report.ScrapeVia != "direct" {
		t.Errorf("Job %s scraped via %q, want direct (the pod network)", first.job.Name, first.report.ScrapeVia)
	}
	if !first.report.StateWritten {
		t.Errorf("Job %s wrote no state", first.job.Name)
	}
	// The pod ran as the chart says: uid 65532, read-only root, its projected token.
	jobPod, err := client.CoreV1().Pods(ns).Get(context.Background(), first.pod, metav1.GetOptions{})
	must(t, err)
	c := jobPod.Spec.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("Job pod %s security context %+v: want uid 65532, read-only root filesystem", first.pod, c.SecurityContext)
	}
	if want := im.WatchdogRepo + "@" + im.WatchdogDigest; c.Image != want {
		t.Errorf("Job pod %s ran %s, want the pushed %s", first.pod, c.Image, want)
	}
	t.Logf("Job pod %s: image %s, the kubelet reports image id %s", first.pod, c.Image, jobPod.Status.ContainerStatuses[0].ImageID)
	if _, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), "agentenv-scheduler-watchdog", metav1.GetOptions{}); err != nil {
		t.Errorf("state ConfigMap: %v", err)
	}

	// ---- helm test --logs, the README's check: doctor in a pod, as the watchdog's
	// ServiceAccount, reaching the TLS webhook as a send would; its log read back
	// through the kubelet after it passed.
	out := helm(t, "test", "watchdog", "--namespace", ns, "--timeout", "2m", "--logs")
	if !strings.Contains(out, "Succeeded") || !strings.Contains(out, "webhook is reachable") {
		t.Errorf("helm test --logs: want the passed test and doctor's log saying the webhook is reachable, got:\n%s", out)
	}

	// ---- dead discovery while the nodes roll
	lost := time.Now()
	must(t, realnode.Control(context.Background(), sched, "discovery?state=lost"))
	kubectl(t, "rollout", "restart", "-n", ns, "deployment/"+realnode.Nodes)
	var restarted jobRun
	for restarted.report.Restarts == nil {
		r := j.next(t, 4*time.Minute-time.Since(lost))
		if r.report.Verdict == "healthy" && r.job.CreationTimestamp.After(lost.Add(30*time.Second)) {
			t.Fatalf("Job %s judged the scheduler healthy %s after its discovery died", r.job.Name, time.Since(lost).Round(time.Second))
		}
		restarted = r
	}
	rr := restarted.report.Restarts[0]
	// The restart's instant: its evidence bundle is saved just before the delete (a
	// report's time is its run's start).
	b := bundle(t, ns, rr.Evidence)
	restartAt := b.At
	timing(t, "node roll -> restart", restartAt.Sub(lost))
	if rr.Pod != sched.Name || rr.Outcome != "done" {
		t.Fatalf("Job %s restart %+v, want %s done", restarted.job.Name, rr, sched.Name)
	}
	// The Deployment's replacement, started by the kubelet.
	replacement, readyAt := replacementReady(t, ns, sched.Name, restartAt, "")
	var recovered jobRun
	for !slices.Contains(eventsOf(recovered), "recovered") {
		recovered = j.next(t, 3*time.Minute-time.Since(readyAt))
	}
	timing(t, "replacement Ready -> recovered (its Job finished)", finished(recovered).Sub(readyAt))
	timing(t, "node roll -> recovered", finished(recovered).Sub(lost))
	got := s.events(t)
	for _, e := range []string{"wedged", "restarted", "recovered"} {
		if n := count(got, e); n != 1 {
			t.Errorf("the webhook sink got %q %d times, want once: %v", e, n, got)
		}
	}
	if len(got) != 3 || got[len(got)-1] != "recovered" {
		t.Errorf("the webhook sink got %v, want wedged and restarted, then recovered, and nothing else", got)
	}
	if len(recovered.report.Targets) != 1 || recovered.report.Targets[0].Pod != replacement {
		t.Errorf("Job %s judged %+v, want the replacement %s", recovered.job.Name, recovered.report.Targets, replacement)
	}

	// ---- the evidence bundle holds the scheduler's real container log, read
	// through the API server from the kubelet before the restart.
	if !strings.Contains(b.Log, "heartbeat rejected: unknown node") || !strings.Contains(b.Log, "watch closed, not re-established") {
		t.Errorf("evidence bundle %s: the log is not the scheduler's (log error %q):\n%s", rr.Evidence, b.LogError, b.Log)
	}

	// ---- `watchdog history` from outside the cluster explains it.
	history := command(t, watchdogBin, "history", "--namespace", ns, "--kubeconfig", kubeconfig)
	for _, want := range []string{sched.Name, "restart", rr.Evidence} {
		if !strings.Contains(history, want) {
			t.Errorf("watchdog history does not mention %q:\n%s", want, history)
		}
	}
	t.Logf("watchdog history:\n%s", history)
	timing(t, "TestCronJobOnARealNode", time.Since(begin))
}

// bundle reads an evidence bundle from the evidence ConfigMap.
func bundle(t *testing.T, ns, key string) evidence.Bundle {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), "agentenv-scheduler-watchdog-evidence", metav1.GetOptions{})
	must(t, err)
	raw, ok := cm.Data[key]
	if !ok {
		t.Fatalf("evidence bundle %q not in the evidence ConfigMap (keys %v)", key, keys(cm.Data))
	}
	// Sealed with the key of the Secret the watchdog created (kube.EnsureKey).
	sec, err := client.CoreV1().Secrets(ns).Get(context.Background(), "agentenv-scheduler-watchdog-key", metav1.GetOptions{})
	must(t, err)
	b, err := evidence.Open(sec.Data[kube.KeyData], ns, key, []byte(raw))
	must(t, err)
	if b.Integrity != evidence.IntegritySealed || b.At.IsZero() {
		t.Errorf("evidence bundle %q: integrity %q, at %s: want sealed with the key of the watchdog's key Secret, with its time", key, b.Integrity, b.At)
	}
	return b
}

// finished is when a run's Job finished.
func finished(r jobRun) time.Time {
	if r.job.Status.CompletionTime != nil {
		return r.job.Status.CompletionTime.Time
	}
	return r.report.Time
}

func count(s []string, v string) int {
	n := 0
	for _, x := range s {
		if x == v {
			n++
		}
	}
	return n
}

// eventsOf are the alert events a run delivered.
func eventsOf(r jobRun) []string {
	var out []string
	for _, d := range r.report.Alerts {
		out = append(out, d.Event)
	}
	return out
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestCheckFromTheHost is `watchdog check --dry-run` from outside the cluster, as
// from a laptop: the scheduler pod's metrics reached through the API server's pod
// proxy, on the node's pod network.
func TestCheckFromTheHost(t *testing.T) {
	needNode(t)
	t.Parallel()
	im := pushImages(t)
	ns := createNamespace(t, "watchdog-from-host")
	must(t, cluster.LayOut(context.Background(), ns, im.Sim))
	sched := schedulerPod(t, ns)
	// Past a short startup grace, judged as any running scheduler.
	started := sched.Status.ContainerStatuses[0].State.Running.StartedAt.Time
	time.Sleep(time.Until(started.Add(6 * time.Second)))
	cmd := exec.CommandContext(t.Context(), watchdogBin, "check", "--dry-run", "--namespace", ns, "--kubeconfig", kubeconfig,
		"--output", "json", "--scrape-via", "apiserver", "--startup-grace", "5s")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("watchdog check: %v\n%s%s", err, out, stderr.String())
	}
	var r check.Report
	must(t, json.Unmarshal(out, &r))
	if r.Verdict != "healthy" || r.ScrapeVia != "apiserver" || !r.DryRun || r.StateWritten {
		t.Errorf("check from the host: verdict %s via %s, dry run %v, state written %v; want healthy via apiserver, a dry run writing nothing\n%s",
			r.Verdict, r.ScrapeVia, r.DryRun, r.StateWritten, out)
	}
	if len(r.Targets) != 1 || r.Targets[0].Pod != sched.Name {
		t.Errorf("judged %+v, want the scheduler pod %s", r.Targets, sched.Name)
	}
}

// TestShadowWeekOnARealNode is the README's first week for real: installed with
// shadow on, a wedge gives a would-restart and no restart; `helm upgrade` with the
// README's own command turns restarts on, the state is kept, and the wedge is
// restarted only after a live run confirmed it afresh.
func TestShadowWeekOnARealNode(t *testing.T) {
	needNode(t)
	t.Parallel()
	begin := time.Now()
	im := pushImages(t)
	ns := createNamespace(t, "shadow-week")
	must(t, cluster.LayOut(context.Background(), ns, im.Sim))
	s := newSink(t)
	sched := schedulerPod(t, ns)
	// Wedged before the install: the first Job, past the startup grace (20 s here),
	// sees the wedge (its age counts from the watchdog's own first sight of it).
	lost := time.Now()
	must(t, realnode.Control(context.Background(), sched, "discovery?state=lost"))
	time.Sleep(time.Until(sched.Status.ContainerStatuses[0].State.Running.StartedAt.Add(21 * time.Second)))
	helm(t, installArgs(im, ns, s, "--set", "decision.shadow=true")...)
	j := newJobs(ns)
	var would jobRun
	for would.report.WouldRestarts == nil {
		would = j.next(t, 4*time.Minute-time.Since(lost))
		if !would.report.Shadow || len(would.report.Restarts) > 0 {
			t.Fatalf("Job %s before the upgrade: shadow %v, restarts %+v; want shadow, no restart", would.job.Name, would.report.Shadow, would.report.Restarts)
		}
	}
	timing(t, "shadow: wedge -> would-restart (its Job finished)", finished(would).Sub(lost))
	if now := schedulerPod(t, ns); now.Name != sched.Name {
		t.Fatalf("the scheduler pod changed in shadow mode: %s -> %s", sched.Name, now.Name)
	}
	// The README's command, at this chart's version and from this registry.
	upgraded := time.Now()
	helm(t, "upgrade", "watchdog", im.ChartRef, "--version", im.ChartVersion, "--plain-http", "-n", ns, "--reset-then-reuse-values", "--set", "decision.shadow=false")
	var live jobRun
	for live.report.Restarts == nil {
		live = j.next(t, 3*time.Minute-time.Since(upgraded))
		if live.job.CreationTimestamp.Time.Before(upgraded) {
			continue // scheduled before the upgrade: still shadow
		}
		if live.report.Shadow {
			t.Fatalf("Job %s after the upgrade still runs in shadow mode", live.job.Name)
		}
		if live.report.Restarts == nil && live.report.Samples < 2 {
			t.Logf("Job %s: %s without confirming (%d samples)", live.job.Name, live.report.Action, live.report.Samples)
		}
	}
	rr := live.report.Restarts[0]
	restartAt := bundle(t, ns, rr.Evidence).At
	timing(t, "shadow: upgrade -> restart", restartAt.Sub(upgraded))
	if live.report.Samples < 2 {
		t.Errorf("Job %s restarted on %d sample(s): a shadow confirmation must not count, a live run confirms afresh", live.job.Name, live.report.Samples)
	}
	if rr.Pod != sched.Name || rr.Outcome != "done" {
		t.Fatalf("Job %s restart %+v, want %s done", live.job.Name, rr, sched.Name)
	}
	replacementReady(t, ns, sched.Name, restartAt, "shadow: ")
	// State kept across the switch: the episode the shadow runs opened is the one restarted.
	status := command(t, watchdogBin, "status", "--namespace", ns, "--kubeconfig", kubeconfig)
	if !strings.Contains(status, "would") {
		t.Errorf("watchdog status after the upgrade does not show the shadow week's would-restart:\n%s", status)
	}
	if got := s.events(t); count(got, "restarted") != 1 {
		t.Errorf("the webhook sink got %v, want one restarted, after the upgrade", got)
	}
	timing(t, "TestShadowWeekOnARealNode", time.Since(begin))
}
