package chart

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/agentenv/watchdog/pkg/cli"
)

// TestShowReadme: `helm show readme` prints the chart's README, whose table lists
// the values (hack/chart-readme's TestREADMEIsCurrent keeps it current).
func TestShowReadme(t *testing.T) {
	out := mustHelm(t, "show", "readme", chartDir)
	file, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	must(t, err)
	if strings.TrimSpace(out) != strings.TrimSpace(string(file)) {
		t.Errorf("helm show readme is not the chart's README.md:\n%.500s", out)
	}
	for _, want := range []string{"| Key | Type | Default | Description |", "| `mode` | string | `\"cronjob\"` |", "| `deployment.podDisruptionBudget.maxUnavailable` |", "| `commonLabels` | object | `{}` |"} {
		if !strings.Contains(out, want) {
			t.Errorf("helm show readme lacks %q", want)
		}
	}
}

// TestDoctorHelpImpersonatesTheReadmesRelease: `doctor --help`'s --as example is the
// ServiceAccount the README's `helm install watchdog` creates (before: the name of a
// release called agentenv-scheduler-watchdog, which nobody installs).
func TestDoctorHelpImpersonatesTheReadmesRelease(t *testing.T) {
	out := mustHelm(t, "template", "watchdog", chartDir, "--namespace", "agentenv-system", "--show-only", "templates/serviceaccount.yaml")
	var sa struct{ Metadata struct{ Name string } }
	must(t, yaml.Unmarshal([]byte(out), &sa))
	var help bytes.Buffer
	cli.ExecuteContext(context.Background(), []string{"doctor", "--help"}, &help, io.Discard)
	if want := "--as system:serviceaccount:agentenv-system:" + sa.Metadata.Name + "\n"; !strings.Contains(help.String(), want) {
		t.Errorf("doctor --help lacks %q:\n%s", want, help.String())
	}
}

// TestReadmeUninstallNamesWhatStays: the README's uninstall section names every
// object `helm uninstall` leaves behind: each one the chart marks
// helm.sh/resource-policy: keep, and the `helm test` Pod (hooks are not uninstalled).
func TestReadmeUninstallNamesWhatStays(t *testing.T) {
	root := filepath.Dir(filepath.Dir(chartDir))
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	must(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Upgrade and uninstall\n")
	if !ok {
		t.Fatal("README has no \"## Upgrade and uninstall\" section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section = strings.Join(strings.Fields(section), " ") // names may wrap
	var kept []string
	// By default, and with every value that keeps more (the evidence, for a post-mortem).
	for _, values := range []string{"", "evidence:\n  keepAfterUninstall: true\n"} {
		for _, o := range render(t, values).objs {
			if o.GetAnnotations()["helm.sh/resource-policy"] == "keep" && !slices.Contains(kept, o.GetName()) {
				kept = append(kept, o.GetName())
			}
		}
	}
	// And what the watchdog creates itself, which helm never owns.
	kept = append(kept, stateName, evidenceName, keySecret)
	for _, name := range append(kept, "watchdog-agentenv-scheduler-watchdog-doctor") {
		if !strings.Contains(section, name) {
			t.Errorf("the README's uninstall section does not name %s, which uninstall leaves", name)
		}
	}
}
