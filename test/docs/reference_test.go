package docs

import (
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// TestDesignMapsEveryPackage: docs/design.md's package map names every package
// under pkg/ and no package that is gone, so a refactor that adds, merges or
// removes one updates the map a newcomer starts from.
func TestDesignMapsEveryPackage(t *testing.T) {
	doc := read(t, "docs/design.md")
	_, table, ok := strings.Cut(doc, "\n## Packages\n")
	if !ok {
		t.Fatal("docs/design.md has no \"## Packages\" section")
	}
	table, _, _ = strings.Cut(table, "\n## ")
	mapped := map[string]bool{}
	for _, m := range regexp.MustCompile("`pkg/([a-z0-9]+)`").FindAllStringSubmatch(table, -1) {
		mapped[m[1]] = true
	}
	dirs, err := os.ReadDir(filepath.Join(root, "pkg"))
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, d := range dirs {
		if d.IsDir() {
			exists[d.Name()] = true
			if !mapped[d.Name()] {
				t.Errorf("docs/design.md's package map lacks pkg/%s", d.Name())
			}
		}
	}
	if len(exists) < 10 {
		t.Fatalf("only %d packages under pkg/: is the walk rooted at the repository?", len(exists))
	}
	for p := range mapped {
		if !exists[p] {
			t.Errorf("docs/design.md's package map names pkg/%s, which does not exist", p)
		}
	}
}
