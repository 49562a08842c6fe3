//go:build release

package release

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/internal/testenv"
)

func helm(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, args...)
	// A helm home of its own: registry logins and caches stay in the test.
	home := t.TempDir()
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String() + stderr.String()
}

// TestReleaseInstallsFromARegistry is a release, locally: a real OCI registry
// (go-containerregistry's, on loopback), the image index pushed with the release
// workflow's own command and the chart with `helm push`, then `helm install` from
// oci:// onto a real API server with the image pinned to the pushed digest; the
// rendered CronJob and helm test hook run exactly that digest.
func TestReleaseInstallsFromARegistry(t *testing.T) {
	reg := httptest.NewServer(registry.New()) // 127.0.0.1 only
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	repo := host + "/agentenv/scheduler-watchdog"

	out, err := exec.Command(releaseBin, "push", "--layout", dist+"/image", "--ref", repo+":"+version, "--insecure").CombinedOutput()
	if err != nil {
		t.Fatalf("release push: %v\n%s", err, out)
	}
	digest := strings.TrimSpace(string(out))
	local, err := imageIndex(t).Digest()
	must(t, err)
	if digest != local.String() {
		t.Fatalf("push printed %s, the layout's index is %s", digest, local)
	}
	// What the registry now serves under the tag is that index, both platforms in it.
	ref, err := name.NewTag(repo+":"+version, name.Insecure)
	must(t, err)
	desc, err := remote.Get(ref)
	must(t, err)
	if desc.Digest.String() != digest || !desc.MediaType.IsIndex() {
		t.Fatalf("the registry serves %s (%s) for %s, want the index %s", desc.Digest, desc.MediaType, ref, digest)
	}
	served, err := desc.ImageIndex()
	must(t, err)
	m, err := served.IndexManifest()
	must(t, err)
	if len(m.Manifests) != 2 {
		t.Errorf("the pushed index lists %d images, want 2", len(m.Manifests))
	}

	chartPath, chart := packagedChart(t)
	helm(t, "push", chartPath, "oci://"+host+"/charts", "--plain-http")

	env, err := testenv.Start()
	must(t, err)
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "release")
	must(t, err)
	helm(t, "install", "watchdog", "oci://"+host+"/charts/agentenv-scheduler-watchdog", "--version", chart.Version, "--plain-http",
		"--kubeconfig", env.Kubeconfig, "--namespace", ns,
		"--set", "image.repository="+repo, "--set", "image.digest="+digest)

	want := repo + "@" + digest
	jobs, err := env.Client.BatchV1().CronJobs(ns).List(ctx, metav1.ListOptions{})
	must(t, err)
	if len(jobs.Items) != 1 {
		t.Fatalf("%d CronJobs installed, want 1", len(jobs.Items))
	}
	for _, c := range jobs.Items[0].Spec.JobTemplate.Spec.Template.Spec.Containers {
		if c.Image != want {
			t.Errorf("CronJob container %s runs %q, want the pushed digest %q", c.Name, c.Image, want)
		}
	}
	hooks := helm(t, "get", "hooks", "watchdog", "--kubeconfig", env.Kubeconfig, "--namespace", ns)
	if !strings.Contains(hooks, `image: "`+want+`"`) {
		t.Errorf("the helm test hook does not run %s:\n%s", want, hooks)
	}
	status := helm(t, "status", "watchdog", "--kubeconfig", env.Kubeconfig, "--namespace", ns)
	if !strings.Contains(status, "STATUS: deployed") {
		t.Errorf("helm status:\n%s", status)
	}
}
