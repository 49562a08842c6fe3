// Package chart tests the Helm chart in charts/agentenv-scheduler-watchdog: rendering
// (`helm template`, `helm lint`, the values schema, the RBAC of each configuration)
// and, on a real kube-apiserver and etcd on 127.0.0.1, `helm install`/`upgrade`/
// `uninstall` followed by the watchdog binary running as the chart's ServiceAccount
// with the chart's own environment.
package chart

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
)

var (
	env *testenv.Env
	// helmBin is helm v3 from hack/tools.sh (or $HELM).
	helmBin string
	// watchdogBin is the watchdog built for these tests, run as a separate process
	// with the environment the chart gives its container.
	watchdogBin string
	// rusageBin runs a command and records its peak RSS and CPU time.
	rusageBin string
	// chartDir is the chart under test.
	chartDir string
	// helmHome isolates helm's config, cache and data from the user's.
	helmHome string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := testenv.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	chartDir = filepath.Join(root, "charts", "agentenv-scheduler-watchdog")
	if helmBin, err = findHelm(root); err != nil {
		fmt.Fprintln(os.Stderr, "chart tests need helm:", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "watchdog-chart-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	helmHome = filepath.Join(tmp, "helm")

	// Built as the Dockerfile builds it (static, stripped), so the measured memory is
	// the image's.
	watchdogBin = filepath.Join(tmp, "watchdog")
	rusageBin = filepath.Join(tmp, "rusage")
	for bin, pkg := range map[string]string{watchdogBin: "./cmd/watchdog", rusageBin: "./test/chart/internal/rusage"} {
		build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, pkg)
		build.Dir = root
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}

	e, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "chart tests need a control plane:", err)
		return 1
	}
	env = e
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop control plane:", err)
	}
	return code
}

// findHelm returns $HELM, else the helm hack/tools.sh installed.
func findHelm(root string) (string, error) {
	if h := os.Getenv("HELM"); h != "" {
		return h, nil
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "tools.sh"), "--print").Output()
	if err != nil {
		return "", fmt.Errorf("helm is not installed: run hack/tools.sh (make test does): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// helm runs helm with an isolated home and returns stdout, stderr and the error.
func helm(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, helmBin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(helmHome, "config"),
		"HELM_CACHE_HOME="+filepath.Join(helmHome, "cache"),
		"HELM_DATA_HOME="+filepath.Join(helmHome, "data"),
		"KUBECONFIG="+env.Kubeconfig,
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustHelm runs helm and fails the test on an error.
func mustHelm(t testing.TB, args ...string) string {
	t.Helper()
	out, stderr, err := helm(t, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stderr, out)
	}
	return out
}

// valuesFile writes a values file for helm -f.
func valuesFile(t testing.TB, yaml string) string {
	t.Helper()
	// Not t.TempDir(): its name carries the test's, and helm -f splits on commas.
	f, err := os.CreateTemp("", "watchdog-values-*.yaml")
	must(t, err)
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	_, err = f.WriteString(yaml)
	must(t, err)
	must(t, f.Close())
	return f.Name()
}

// The shared test helpers (internal/testenv) under the short names these tests use.
var (
	must    = testenv.Must
	fixture = testenv.MustFixture
	waitFor = testenv.WaitFor
)
