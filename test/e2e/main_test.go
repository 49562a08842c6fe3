// Package e2e runs the chart as it runs in production, on a real one-node cluster
// (hack/cluster.sh: kubelet, containerd, a pod network, kube-proxy, the controllers):
// installed with helm from oci:// on the registry the node pulls from, the CronJob's
// Job pods running the image as uid 65532 with a read-only root filesystem,
// in-cluster, scraping a scheduler stand-in pod (hack/schedsim) over the pod network,
// and restarting it for real. `make e2e` starts the node, runs this, and stops it.
//
// Without the node (`make test`, or not root) every test here is skipped, saying why.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/agentenv/watchdog/internal/realnode"
	"github.com/agentenv/watchdog/internal/testenv"
)

// What `make e2e` hands over (hack/cluster.sh env, plus the binaries it built).
var (
	cluster                                      *realnode.Cluster
	kubeconfig, clusterBin, helmBin, watchdogBin string
	root, skipReason                             string
	tmpDir                                       string // removed after the tests
	client                                       kubernetes.Interface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("WATCHDOG_E2E") == "" {
		skipReason = "the end-to-end tests run on a real node: `make e2e` (root on Linux) starts one and runs them"
		if os.Geteuid() != 0 {
			skipReason += "; this process is not root, so it cannot"
		}
		fmt.Fprintln(os.Stderr, "test/e2e: skipped:", skipReason)
		return m.Run()
	}
	var err error
	if cluster, err = realnode.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, "test/e2e:", err)
		return 1
	}
	kubeconfig, clusterBin, client = cluster.Kubeconfig, cluster.Bin, cluster.Client
	for name, into := range map[string]*string{"HELM": &helmBin, "WATCHDOG_BIN": &watchdogBin} {
		if *into = os.Getenv(name); *into == "" {
			fmt.Fprintf(os.Stderr, "test/e2e: WATCHDOG_E2E is set but %s is not: run these tests with `make e2e`\n", name)
			return 1
		}
	}
	if root, err = testenv.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if tmpDir, err = os.MkdirTemp("", "watchdog-e2e-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmpDir)
	return m.Run()
}

// needNode skips a test that needs the real node when there is none.
func needNode(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
}

// command runs a program with the cluster's kubeconfig and a helm home of the
// test's own, and returns its output; it fails the test on an error.
func command(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := tryCommand(t, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return out
}

func tryCommand(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	// Not t.Context(): cleanups run commands too, after it is canceled.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = root
	// A helm home per test: the tests run in parallel.
	home := filepath.Join(tmpDir, "helm", strings.ReplaceAll(t.Name(), "/", "_"))
	cmd.Env = append(append(cmd.Environ(), "KUBECONFIG="+kubeconfig), helmEnv(home)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return command(t, filepath.Join(clusterBin, "kubectl"), args...)
}

func helm(t *testing.T, args ...string) string {
	t.Helper()
	return command(t, helmBin, args...)
}

// helmEnv is a helm home of the tests' own: registry logins and caches stay out of
// the user's.
func helmEnv(home string) []string {
	return []string{"HELM_CACHE_HOME=" + home + "/cache", "HELM_CONFIG_HOME=" + home + "/config", "HELM_DATA_HOME=" + home + "/data"}
}
