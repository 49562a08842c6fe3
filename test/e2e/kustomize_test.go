package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/realnode"
)

// e2eOverlay is an overlay of deploy/kustomize/overlays/live as a GitOps user writes
// one: the pushed image, a CronJob every minute and the decision's timings shortened
// (as installArgs does for the chart).
const e2eOverlay = `apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
images:
  - name: ghcr.io/agentenv/scheduler-watchdog
    newName: %s
    digest: %s
patches:
  - patch: |-
      apiVersion: batch/v1
      kind: CronJob
      metadata:
        name: agentenv-scheduler-watchdog
        namespace: agentenv-system
      spec:
        schedule: "*/1 * * * *"
        jobTemplate:
          spec:
            activeDeadlineSeconds: 55
            template:
              spec:
                containers:
                  - name: watchdog
                    env:
                      - {name: WATCHDOG_TIMEOUT, value: 45s}
                      - {name: WATCHDOG_JOB_ACTIVE_DEADLINE, value: 55s}
                      - {name: WATCHDOG_STARTUP_GRACE, value: 20s}
                      - {name: WATCHDOG_WEDGED_FOR, value: 30s}
                      - {name: WATCHDOG_CONFIRM_WINDOW, value: 10s}
                      - {name: WATCHDOG_SAMPLE_INTERVAL, value: 2s}
`

// TestKustomizeOnARealNode: the install without Helm (docs/gitops.md). `kubectl apply
// -k` of an overlay of the base, no hook Pod; the CronJob's Jobs judge the scheduler
// healthy and the first real pass creates the key Secret; dead discovery → restart
// → recovered; the doctor Job recipe of docs/gitops.md passes; `kubectl delete -k`
// removes every object of the base and leaves what the watchdog created itself,
// as the docs' table says. Not parallel: the base's namespace is agentenv-system,
// which TestCronJobOnARealNode uses after it.
func TestKustomizeOnARealNode(t *testing.T) {
	needNode(t)
	ctx := context.Background()
	im := pushImages(t)
	ns := createNamespace(t, "agentenv-system")
	t.Cleanup(func() { // TestCronJobOnARealNode creates the namespace again
		// Cleanups run last first: createNamespace's delete has not run yet.
		_ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
		waitFor(t, 3*time.Minute, "namespace "+ns+" gone", func() bool {
			_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		})
	})
	must(t, cluster.LayOut(ctx, ns, im.Sim))
	repo, digest := im.WatchdogRepo, im.WatchdogDigest
	dir := t.TempDir()
	live, err := filepath.Rel(dir, filepath.Join(root, "deploy", "kustomize", "overlays", "live"))
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(fmt.Sprintf(e2eOverlay, live, repo, digest)), 0o644))

	// The first run judges a scheduler past its startup grace (20 s here).
	started := schedulerPod(t, ns).Status.ContainerStatuses[0].State.Running.StartedAt.Time
	time.Sleep(time.Until(started.Add(21 * time.Second)))
	kubectl(t, "apply", "-k", dir)
	installed := time.Now()
	rendered := kubectl(t, "kustomize", dir)
	if strings.Contains(rendered, "\nkind: Pod\n") || strings.Contains(rendered, "helm.sh/hook") {
		t.Fatalf("the overlay renders a hook or a Pod:\n%s", rendered)
	}

	// ---- healthy, and the key Secret made by the first real pass
	j := newJobs(ns)
	first := j.next(t, 3*time.Minute)
	timing(t, "kubectl apply -k -> first Job finished", time.Since(installed))
	if first.job.Status.Succeeded != 1 || first.report.Verdict != "healthy" || !first.report.StateWritten {
		t.Fatalf("the first Job: %+v, verdict %q:\n%s", first.job.Status, first.report.Verdict, first.log)
	}
	key, err := client.CoreV1().Secrets(ns).Get(ctx, "agentenv-scheduler-watchdog-key", metav1.GetOptions{})
	must(t, err)
	if len(key.Data["key"]) != 32 || key.Labels["app.kubernetes.io/managed-by"] != "agentenv-scheduler-watchdog" {
		t.Fatalf("key Secret: %d bytes, labels %v", len(key.Data["key"]), key.Labels)
	}

	// ---- dead discovery while the nodes roll → restart → recovered
	sched := schedulerPod(t, ns)
	lost := time.Now()
	must(t, realnode.Control(ctx, sched, "discovery?state=lost"))
	kubectl(t, "rollout", "restart", "-n", ns, "deployment/"+realnode.Nodes)
	var restarted jobRun
	for restarted.report.Restarts == nil {
		restarted = j.next(t, 4*time.Minute-time.Since(lost))
	}
	rr := restarted.report.Restarts[0]
	if rr.Pod != sched.Name || rr.Outcome != "done" {
		t.Fatalf("Job %s restart %+v, want %s done", restarted.job.Name, rr, sched.Name)
	}
	restartAt := bundle(t, ns, rr.Evidence).At
	timing(t, "kustomize: node roll -> restart", restartAt.Sub(lost))
	_, readyAt := replacementReady(t, ns, sched.Name, restartAt, "")
	var recovered jobRun
	for !slices.Contains(eventsOf(recovered), "recovered") {
		recovered = j.next(t, 3*time.Minute-time.Since(readyAt))
	}

	// ---- `helm test` without Helm: the doctor Job recipe, as docs/gitops.md prints it
	doctorJob(t, ns)

	// ---- kubectl delete -k: what remains is what docs/gitops.md says
	kubectl(t, "delete", "-k", dir, "--wait")
	for _, o := range []struct{ kind, name string }{
		{"cronjob", "agentenv-scheduler-watchdog"}, {"role", "agentenv-scheduler-watchdog"},
		{"rolebinding", "agentenv-scheduler-watchdog"}, {"serviceaccount", "agentenv-scheduler-watchdog"},
		{"validatingadmissionpolicy", "agentenv-scheduler-watchdog-agentenv-system"},
	} {
		if out, err := tryCommand(t, filepath.Join(clusterBin, "kubectl"), "get", "-n", ns, o.kind, o.name); err == nil {
			t.Errorf("kubectl delete -k left %s %s:\n%s", o.kind, o.name, out)
		}
	}
	if _, err := client.CoreV1().Secrets(ns).Get(ctx, key.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("kubectl delete -k removed the key Secret (docs/gitops.md: it stays): %v", err)
	}
	// What the watchdog made itself stays; the docs' command removes it.
	kept := kubectl(t, "get", "-n", ns, "secret,configmap", "-l", "app.kubernetes.io/managed-by=agentenv-scheduler-watchdog", "-o", "name")
	t.Logf("after kubectl delete -k, the watchdog's own objects:\n%s", kept)
	kubectl(t, "-n", ns, "delete", "secret,configmap", "-l", "app.kubernetes.io/managed-by=agentenv-scheduler-watchdog")
}

// doctorJob runs docs/gitops.md's "helm test without Helm" recipe as printed, with
// the node's kubectl, and wants the Job complete.
func doctorJob(t *testing.T, ns string) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "gitops.md"))
	must(t, err)
	_, recipe, ok := strings.Cut(string(doc), "## `helm test` without Helm")
	if !ok {
		t.Fatal("docs/gitops.md has no doctor Job recipe")
	}
	_, recipe, _ = strings.Cut(recipe, "```sh\n")
	recipe, _, _ = strings.Cut(recipe, "```")
	recipe = strings.ReplaceAll(recipe, "kubectl ", filepath.Join(clusterBin, "kubectl")+" ")
	recipe = strings.ReplaceAll(recipe, "-n agentenv-system", "-n "+ns)
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+recipe)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "✓") {
		t.Errorf("the doctor Job recipe: %v\n%s", err, out)
	}
}
