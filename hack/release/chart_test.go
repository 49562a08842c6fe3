package main

import (
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestChartPackageReproducible: two `helm package` runs of one chart a second
// apart differ (helm stamps each entry with its clock); after `release chart` they
// are the same bytes, and the package is still a chart helm reads.
func TestChartPackageReproducible(t *testing.T) {
	root, helm := helmTool(t)
	chart := filepath.Join(root, "charts", "agentenv-scheduler-watchdog")
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pkg := func(dir string) (string, []byte) {
		t.Helper()
		cmd := exec.Command(helm, "package", chart, "--destination", dir)
		cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("helm package: %v\n%s", err, b)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "*.tgz"))
		if len(files) != 1 {
			t.Fatalf("helm package wrote %v", files)
		}
		b, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		return files[0], b
	}
	a, before1 := pkg(t.TempDir())
	time.Sleep(1100 * time.Millisecond) // tar times are in whole seconds
	b, before2 := pkg(t.TempDir())
	if sha256.Sum256(before1) == sha256.Sum256(before2) {
		t.Fatal("two helm packages a second apart are already identical: the test proves nothing")
	}
	if err := chartCommand([]string{"--created", at.Format(time.RFC3339), a, b}); err != nil {
		t.Fatal(err)
	}
	after1, _ := os.ReadFile(a)
	after2, _ := os.ReadFile(b)
	if sha256.Sum256(after1) != sha256.Sum256(after2) {
		t.Fatal("the normalized packages differ")
	}
	if err := normalizeChart(a, at); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(a); sha256.Sum256(again) != sha256.Sum256(after1) {
		t.Error("normalizing twice changes the package")
	}
	cmd := exec.Command(helm, "show", "chart", a)
	if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), "name: agentenv-scheduler-watchdog") {
		t.Errorf("helm show chart of the normalized package: %v\n%s", err, b)
	}
}

// helmTool returns the repository's root and the helm hack/tools.sh installed.
func helmTool(t *testing.T) (root, helm string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("bash", filepath.Join(root, "hack", "tools.sh"), "--print").Output()
	if err != nil {
		t.Fatalf("helm is not installed: run hack/tools.sh (make test does): %v", err)
	}
	return root, strings.TrimSpace(string(out))
}
