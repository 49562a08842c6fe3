package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/realnode"
	"github.com/agentenv/watchdog/pkg/evidence"
)

// TestRunModeLeaderKilledOnARealNode is `watchdog run` with two replicas electing
// a leader on the chart's Lease: the scheduler loses its node discovery while the
// nodes roll, the leader is killed while it confirms the wedge (before any
// restart), another replica takes the Lease over (the standby, or the ReplicaSet's
// new pod if it campaigns first) from the state ConfigMap, and the scheduler is
// restarted once, `wedged` paged once, `restarted` once.
func TestRunModeLeaderKilledOnARealNode(t *testing.T) {
	needNode(t)
	t.Parallel()
	begin := time.Now()
	ctx := context.Background()
	im := pushImages(t)
	ns := createNamespace(t, "run-mode")
	must(t, cluster.LayOut(ctx, ns, im.Sim))
	s := newSink(t)
	sched := schedulerPod(t, ns)
	// Judged past its startup grace from the first pass.
	time.Sleep(time.Until(sched.Status.ContainerStatuses[0].State.Running.StartedAt.Add(21 * time.Second)))
	// A confirm window of 40 s, so the leader is still confirming when it is killed;
	// passes every 20 s.
	helm(t, installArgs(im, ns, s, "--set", "mode=deployment", "--set", "deployment.replicas=2",
		"--set", "deployment.interval=20s", "--set", "run.timeout=90s", "--set", "decision.confirmWindow=40s")...)
	timing(t, "run mode: installed, 2 replicas Ready", time.Since(begin))

	leader := leaseHolder(t, ns)
	waitFor(t, 2*time.Minute, "a healthy pass of the leader "+leader, func() bool {
		return slices.ContainsFunc(podLogLines(t, ns, leader), func(l string) bool {
			return strings.Contains(l, "run complete") && strings.Contains(l, `"verdict":"healthy"`)
		})
	})

	// ---- dead discovery while the nodes roll
	lost := time.Now()
	must(t, realnode.Control(ctx, sched, "discovery?state=lost"))
	kubectl(t, "rollout", "restart", "-n", ns, "deployment/"+realnode.Nodes)
	waitFor(t, 3*time.Minute, "the leader "+leader+" confirming a wedge", func() bool {
		return slices.ContainsFunc(podLogLines(t, ns, leader), func(l string) bool {
			return strings.Contains(l, "sampling again to confirm") && strings.Contains(l, `"verdict":"wedged"`)
		})
	})
	timing(t, "run mode: node roll -> leader confirming", time.Since(lost))
	// Mid-wedge: no restart yet (the scheduler pod is the same), then the leader
	// pod is killed, with no grace asked for.
	if now := schedulerPod(t, ns); now.Name != sched.Name || count(s.events(t), "restarted") > 0 {
		t.Fatalf("the scheduler was restarted before the leader could be killed (pod %s, pages %v): nothing left to prove", now.Name, s.events(t))
	}
	pagedBefore := s.events(t)
	other := ""
	watchdogs, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=watchdog"})
	must(t, err)
	for _, p := range watchdogs.Items {
		if p.Name != leader {
			other = p.Name
		}
	}
	killed := time.Now()
	kubectl(t, "delete", "pod", "-n", ns, leader, "--grace-period=0", "--force", "--wait=false")
	t.Logf("killed the leader %s while it confirmed the wedge; pages so far %v", leader, pagedBefore)

	// ---- the standby takes over and restarts the scheduler once.
	var standby string
	waitFor(t, time.Minute, "a new leader", func() bool {
		standby = tryLeaseHolder(ns)
		return standby != "" && standby != leader
	})
	timing(t, "run mode: leader killed -> another replica leads", time.Since(killed))
	if standby != other {
		// The ReplicaSet's new pod can win the Lease before the standby's next try.
		t.Logf("the new leader is %s, the killed leader's replacement replica, not the standby %s", standby, other)
	}
	// The restart's instant: its evidence bundle, saved just before the delete.
	var restart evidence.Bundle
	waitFor(t, 3*time.Minute, "the new leader's restart (its evidence bundle)", func() bool {
		bundles := restartBundles(t, ns)
		if len(bundles) > 0 {
			restart = bundles[0]
		}
		return len(bundles) > 0
	})
	timing(t, "run mode: node roll -> restart", restart.At.Sub(lost))
	timing(t, "run mode: leader killed -> restart", restart.At.Sub(killed))
	replacement, readyAt := replacementReady(t, ns, sched.Name, restart.At, "run mode: ")
	waitFor(t, 3*time.Minute, "recovered at the webhook sink", func() bool { return !s.received("recovered").IsZero() })
	timing(t, "run mode: replacement Ready -> recovered (page received)", s.received("recovered").Sub(readyAt))
	timing(t, "run mode: node roll -> recovered", s.received("recovered").Sub(lost))
	// A pass more, so a second restart or a duplicate page would be seen.
	time.Sleep(25 * time.Second)

	got := s.events(t)
	for _, e := range []string{"wedged", "restarted", "recovered"} {
		if n := count(got, e); n != 1 {
			t.Errorf("the webhook sink got %q %d times, want once: %v", e, n, got)
		}
	}
	if len(got) != 3 {
		t.Errorf("the webhook sink got %v, want wedged, restarted and recovered, and nothing else", got)
	}
	// One restart: the original pod replaced by one pod, which was never restarted.
	pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + realnode.Scheduler})
	must(t, err)
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != replacement {
		t.Errorf("scheduler pods %v, want only the one replacement %s: one restart", names, replacement)
	}
	if bundles := restartBundles(t, ns); len(bundles) != 1 || bundles[0].Pod != sched.Name {
		t.Errorf("restart evidence bundles %+v, want one, of %s: one restart", bundles, sched.Name)
	}
	if h := tryLeaseHolder(ns); h != standby {
		t.Errorf("the Lease is held by %q, want %s that took over", h, standby)
	}
	if standbyLog := strings.Join(podLogLines(t, ns, standby), "\n"); !strings.Contains(standbyLog, "became leader") {
		t.Errorf("the standby %s never logged that it became leader:\n%s", standby, standbyLog)
	}
	history := command(t, watchdogBin, "history", "--namespace", ns, "--kubeconfig", kubeconfig)
	if !strings.Contains(history, sched.Name) {
		t.Errorf("watchdog history does not mention the restarted %s:\n%s", sched.Name, history)
	}
	t.Logf("watchdog history:\n%s", history)
	timing(t, "TestRunModeLeaderKilledOnARealNode", time.Since(begin))
}

// leaseHolder is the holder of the watchdog's leader-election Lease (the chart's
// default name), waiting for one.
func leaseHolder(t *testing.T, ns string) string {
	t.Helper()
	var h string
	waitFor(t, time.Minute, "a watchdog leader", func() bool {
		h = tryLeaseHolder(ns)
		return h != ""
	})
	return h
}

func tryLeaseHolder(ns string) string {
	l, err := client.CoordinationV1().Leases(ns).Get(context.Background(), "agentenv-scheduler-watchdog", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// podLogLines is a watchdog pod's log so far, read through the kubelet; nil while
// it cannot be read.
func podLogLines(t *testing.T, ns, pod string) []string {
	t.Helper()
	raw, err := client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "watchdog"}).DoRaw(context.Background())
	if err != nil {
		return nil
	}
	return strings.Split(string(raw), "\n")
}

// restartBundles are the evidence bundles of restarts (not would-restarts) in the
// evidence ConfigMap, oldest first.
func restartBundles(t *testing.T, ns string) []evidence.Bundle {
	t.Helper()
	cm, err := client.CoreV1().ConfigMaps(ns).Get(context.Background(), "agentenv-scheduler-watchdog-evidence", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	var out []evidence.Bundle
	for _, k := range keys(cm.Data) {
		if b := bundle(t, ns, k); b.Action == "restart" {
			out = append(out, b)
		}
	}
	return out
}
