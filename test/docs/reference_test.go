package docs

import (
	"io"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/cli"
)

// tableFlags are the flags named in the first cell of a markdown table's rows:
// "| `--namespace`, `-n` | ..." names --namespace.
func tableFlags(doc string) map[string]bool {
	set := map[string]bool{}
	for _, row := range regexp.MustCompile("(?m)^\\| *(`--[^|]+)\\|").FindAllStringSubmatch(doc, -1) {
		for _, f := range regexp.MustCompile("`--([a-z0-9-]+)`").FindAllStringSubmatch(row[1], -1) {
			set[f[1]] = true
		}
	}
	return set
}

// TestEveryFlagIsDocumented: docs/versioning.md calls the flags the interface and
// points at the README's flag table for them; every flag a command shows has a
// row there, and backtest's own flags a row in docs/backtest.md's table.
func TestEveryFlagIsDocumented(t *testing.T) {
	readme, backtest := tableFlags(read(t, "README.md")), tableFlags(read(t, "docs/backtest.md"))
	own := pflag.NewFlagSet("backtest", pflag.ContinueOnError)
	(&cli.BacktestOptions{}).AddFlags(own)

	missing := map[string][]string{} // doc → flags
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			sub.LocalFlags().VisitAll(func(f *pflag.Flag) {
				if f.Hidden || f.Name == "help" {
					return
				}
				if sub.Name() == "backtest" && own.Lookup(f.Name) != nil {
					if !backtest[f.Name] {
						missing["docs/backtest.md"] = append(missing["docs/backtest.md"], "--"+f.Name)
					}
					return
				}
				if !readme[f.Name] {
					missing["README.md"] = append(missing["README.md"], sub.CommandPath()+" --"+f.Name)
				}
			})
			walk(sub)
		}
	}
	walk(cli.NewRootCommand(io.Discard, io.Discard))
	for doc, flags := range missing {
		sort.Strings(flags)
		t.Errorf("%s's flag table has no row for: %s", doc, strings.Join(flags, ", "))
	}
	if len(readme) < 40 || len(backtest) < 10 {
		t.Errorf("flag tables found: README.md %d rows, docs/backtest.md %d: the table parser is broken", len(readme), len(backtest))
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
