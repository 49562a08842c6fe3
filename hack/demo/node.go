package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/realnode"
	"github.com/agentenv/watchdog/internal/testenv"
)

// runNode tells the same story on the real one-node cluster hack/cluster.sh started
// (make demo, as root on Linux): the scheduler stand-in and its runtime nodes are
// pods the kubelet runs, the chart is installed from the node's registry (its
// CronJob suspended: this story is told from the host), the watchdog scrapes
// through the API server's pod proxy, and the restart really deletes the pod: the
// Deployment's replacement is started by the kubelet.
func runNode(bin, helmBin string) error {
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	c, err := realnode.FromEnv()
	if err != nil {
		return err
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s, start := &story{}, time.Now()
	home, err := os.MkdirTemp("", "watchdog-demo-helm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	helmEnv := []string{"HELM_CACHE_HOME=" + home + "/cache", "HELM_CONFIG_HOME=" + home + "/config", "HELM_DATA_HOME=" + home + "/data"}
	show := func(name string, args ...string) error {
		fmt.Println(styled("2", "$ "+filepath.Base(name)+" "+strings.Join(args, " ")))
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(append(os.Environ(), "KUBECONFIG="+c.Kubeconfig), helmEnv...)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		return cmd.Run()
	}
	kubectl := filepath.Join(c.Bin, "kubectl")

	step("pushing the watchdog's image, the scheduler stand-in's and the chart to the node's registry (%s)", c.Registry)
	im, err := c.Push(ctx, root, bin, "", helmBin, helmEnv)
	if err != nil {
		return err
	}
	fmt.Printf("watchdog %s@%s\nchart %s %s\n", im.WatchdogRepo, im.WatchdogDigest, im.ChartRef, im.ChartVersion)

	step("laying out the AgentENV scheduler in %s: its Deployment and 3 runtime nodes, pods the kubelet runs", ns)
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := c.LayOut(ctx, ns, im.Sim); err != nil {
		return err
	}
	if err := show(kubectl, "get", "pods", "-n", ns, "-o", "wide"); err != nil {
		return err
	}

	step("helm install from oci:// at the pushed digest (CronJob suspended: the host tells this story), then helm test")
	if err := show(helmBin, "install", "watchdog", im.ChartRef, "--version", im.ChartVersion, "--plain-http", "--namespace", ns, "--wait",
		"--set", "image.repository="+im.WatchdogRepo, "--set", "image.digest="+im.WatchdogDigest, "--set", "cronjob.suspend=true"); err != nil {
		return err
	}
	if err := show(helmBin, "test", "watchdog", "--namespace", ns, "--timeout", "2m"); err != nil {
		return err
	}

	receiver, secret := startReceiver(s)
	defer receiver.Close()
	// From the host, the scheduler's pod IP is reached as from a laptop: through the
	// API server's pod proxy.
	watchdog, capture := runner(bin, c.Kubeconfig, receiver.URL, secret, s, "--scrape-via", "apiserver")

	step("1. healthy: the scheduler pod sees its 3 nodes")
	if err := watchdog("check"); err != nil {
		return err
	}

	step("2. discovery dies while the runtime nodes roll: ready drops to 0, node heartbeats are rejected")
	pods, err := c.SchedulerPods(ctx, ns)
	if err != nil || len(pods) != 1 {
		return fmt.Errorf("want one Ready scheduler pod: %d, %v", len(pods), err)
	}
	old := pods[0]
	s.restarted = old.Name
	if err := realnode.Control(ctx, &old, "discovery?state=lost"); err != nil {
		return err
	}
	if err := show(kubectl, "rollout", "restart", "-n", ns, "deployment/"+realnode.Nodes); err != nil {
		return err
	}
	// The stand-in's clock runs 4x: its ready gauge drops ~40 s (scheduler time) after the roll.
	time.Sleep(15 * time.Second)
	if err := watchdog("check", "--dry-run"); err != nil {
		return err
	}
	step("2b. shadow mode (the first week's setting): a would-restart, no restart")
	if err := watchdog("check", "--shadow"); err != nil {
		return err
	}
	step("3. restarts on: confirmed afresh, then the pod is deleted for real")
	if err := watchdog("check"); err != nil {
		return err
	}
	step("4. the Deployment's replacement, started by the kubelet")
	err = realnode.Poll(ctx, "the replacement scheduler pod", func() bool {
		pods, err := c.SchedulerPods(ctx, ns)
		if err == nil && len(pods) == 1 && pods[0].Name != old.Name {
			s.replacement = pods[0].Name
		}
		return s.replacement != ""
	})
	if err != nil {
		return err
	}
	if err := show(kubectl, "get", "pods", "-n", ns, "-l", "app.kubernetes.io/name="+realnode.Scheduler, "-o", "wide"); err != nil {
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
	step("what it did and why, newest first (watchdog history)")
	if err := watchdog("history"); err != nil {
		return err
	}
	if err := showEvidence(ctx, c.Client, s, capture); err != nil {
		return err
	}
	step("Kubernetes Events, from the watchdog and the cluster")
	if err := show(kubectl, "get", "events", "-n", ns, "--sort-by", ".lastTimestamp"); err != nil {
		return err
	}
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	s.countEvents(events.Items)
	step("summary")
	s.writeSummary(os.Stdout, time.Since(start))
	return nil
}
