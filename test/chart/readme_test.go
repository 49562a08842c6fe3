package chart

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
