package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/realnode"
)

// TestCanaryOnARealNode is the discovery probe as it runs: the chart's CronJob in
// canary mode (timings shortened as installArgs's, the probe window with them), the
// stand-in scheduler's real discovery in its pod reading the API server with its
// own ServiceAccount, the canary written with the pod's IP and answered on it.
// Healthy: each Job sees its canary. Discovery dead with NO node change: restarted
// within two CronJob runs. Then the nodes stop reaching the (new, live) scheduler:
// the precise alert, no restart. Uninstalled: no canary left.
func TestCanaryOnARealNode(t *testing.T) {
	needNode(t)
	t.Parallel()
	begin := time.Now()
	im := pushImages(t)
	ns := createNamespace(t, "agentenv-probe")
	must(t, cluster.LayOut(context.Background(), ns, im.Sim))
	s := newSink(t)
	sched := schedulerPod(t, ns)
	time.Sleep(time.Until(sched.Status.ContainerStatuses[0].State.Running.StartedAt.Add(21 * time.Second)))
	// A Job here ends 30 s before its 55 s deadline and samples ~14 s: a 16 s window
	// is then reached early in the second run, which confirms for 10 s, as a */5 run
	// samples ~2m30s of a 3m window (design.md, "The discovery probe").
	helm(t, installArgs(im, ns, s, "--set", "probe.mode=canary", "--set", "probe.window=16s")...)
	j := newJobs(ns)
	first := j.next(t, 3*time.Minute)
	if first.report.Verdict != "healthy" || len(first.report.Targets) != 1 || !strings.Contains(first.report.Targets[0].Probe, "after it was written") {
		t.Fatalf("Job %s: %s, probe %+v: want healthy, its canary seen\n%s", first.job.Name, first.report.Verdict, first.report.Targets, first.log)
	}

	// ---- discovery dies while no node changes: ready 3, heartbeats accepted.
	dead := time.Now()
	must(t, realnode.Control(context.Background(), sched, "discovery?state=dead"))
	var runs int
	var restarted jobRun
	for restarted.report.Restarts == nil {
		r := j.next(t, 4*time.Minute-time.Since(dead))
		if r.job.CreationTimestamp.Before(&metav1.Time{Time: dead}) {
			continue
		}
		runs++
		restarted = r
	}
	rr := restarted.report.Restarts[0]
	restartAt := bundle(t, ns, rr.Evidence).At
	timing(t, "canary: discovery dead (no node change) -> restart", restartAt.Sub(dead))
	if runs > 2 || rr.Pod != sched.Name || !strings.Contains(restarted.report.Reason, "canaries were missing") {
		t.Errorf("restarted by the %d. run after the death (want ≤ 2), %+v: %s", runs, rr, restarted.report.Reason)
	}
	_, readyAt := replacementReady(t, ns, sched.Name, restartAt, "canary: ")

	// ---- the nodes stop reaching the new scheduler, whose discovery works.
	time.Sleep(time.Until(readyAt.Add(25 * time.Second)))
	fresh := schedulerPod(t, ns)
	must(t, realnode.Control(context.Background(), fresh, "discovery?state=unreachable"))
	cut := time.Now()
	var unreached jobRun
	for !slices.Contains(eventsOf(unreached), "nodes-unreachable") {
		unreached = j.next(t, 4*time.Minute-time.Since(cut))
		if len(unreached.report.Restarts) > 0 {
			t.Fatalf("Job %s restarted a scheduler the nodes cannot reach: %s", unreached.job.Name, unreached.report.Reason)
		}
	}
	timing(t, "canary: nodes cut off -> nodes-unreachable", finished(unreached).Sub(cut))
	if got := s.events(t); count(got, "restarted") != 1 || count(got, "nodes-unreachable") != 1 {
		t.Errorf("the webhook sink got %v: want one restarted, one nodes-unreachable", got)
	}

	// ---- uninstalled: no canary left behind, whatever a Job was doing.
	helm(t, "uninstall", "watchdog", "-n", ns, "--wait", "--timeout", "2m")
	must(t, realnode.Poll(t.Context(), "the canary gone after uninstall", func() bool {
		_, err := client.DiscoveryV1().EndpointSlices(ns).Get(context.Background(), "agentenv-scheduler-watchdog-probe", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}))
	timing(t, "TestCanaryOnARealNode", time.Since(begin))
}
