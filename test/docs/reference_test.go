package docs

import (
	"io"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/agentenv/watchdog/internal/clidocs"
	"github.com/agentenv/watchdog/pkg/cli"
)

// TestCLIReferenceIsCurrent: docs/cli/ is what cobra's doc generator writes from
// the commands today (docs/versioning.md calls the flags the interface and points
// there), so every flag a command has is documented, with its help and default.
// Fails when a flag or command changed without regenerating: the fix is
// `make cli-docs`.
func TestCLIReferenceIsCurrent(t *testing.T) {
	want, err := clidocs.Pages(cli.NewRootCommand(io.Discard, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := clidocs.Read(filepath.Join(root, clidocs.Dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range clidocs.Diff(committed, want) {
		t.Errorf("%s: run `make cli-docs`", d)
	}
}

// TestMonitoringListsEveryWatchdogMetric: every family the watchdog exports
// (pkg/metrics) is a row of docs/monitoring.md's table, where docs/versioning.md
// says the metric names of the interface are defined.
func TestMonitoringListsEveryWatchdogMetric(t *testing.T) {
	src := read(t, "pkg/metrics/metrics.go")
	names := regexp.MustCompile(`Name:\s*"(agentenv_watchdog_[a-z_]+)"`).FindAllStringSubmatch(src, -1)
	if len(names) < 10 {
		t.Fatalf("found %d metric names in pkg/metrics/metrics.go: the pattern is stale", len(names))
	}
	doc := read(t, "docs/monitoring.md")
	for _, n := range names {
		if !regexp.MustCompile("(?m)^\\| `" + n[1] + "[{`]").MatchString(doc) {
			t.Errorf("docs/monitoring.md's table has no row for %s", n[1])
		}
	}
}
