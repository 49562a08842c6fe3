package clidocs

import (
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/cli"
)

// TestEveryFlagHasItsLine: the pages of the real commands name every flag a
// command's --help shows, on its command's page, with its help text; hidden
// flags stay out. This is what replaced a hand-kept flag table.
func TestEveryFlagHasItsLine(t *testing.T) {
	root := cli.NewRootCommand(io.Discard, io.Discard)
	pages, err := Pages(root)
	if err != nil {
		t.Fatal(err)
	}
	flags := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		page, ok := pages[FileName(c)]
		if !ok {
			t.Errorf("%q has no page", c.CommandPath())
			return
		}
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			// The flag's own line, as pflag writes it: "  -n, --namespace string  help".
			own := regexp.MustCompile(`(?m)^ +(-[a-zA-Z], )?--` + regexp.QuoteMeta(f.Name) + `( .*)?$`)
			line := own.FindString(options(string(page)))
			switch {
			case f.Hidden && line != "":
				t.Errorf("%s: hidden --%s is documented: %s", FileName(c), f.Name, line)
			case !f.Hidden && line == "":
				t.Errorf("%s has no line for --%s", FileName(c), f.Name)
			case !f.Hidden && !strings.Contains(line, firstWords(f.Usage)):
				t.Errorf("%s: --%s's line lacks its help %q: %s", FileName(c), f.Name, f.Usage, line)
			}
			if !f.Hidden {
				flags++
			}
		})
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(root)
	if flags < 60 {
		t.Errorf("only %d flags documented: the walk is broken", flags)
	}
}

// options is a page's "### Options" section: the flags, not the examples.
func options(page string) string {
	_, after, _ := strings.Cut(page, "\n### Options\n")
	section, _, _ := strings.Cut(after, "\n### ")
	return section
}

// firstWords is the start of a help text, before any backquoted word pflag turns
// into the value's name.
func firstWords(usage string) string {
	if i := strings.IndexByte(usage, '`'); i >= 0 {
		usage = usage[:i]
	}
	if len(usage) > 40 {
		usage = usage[:40]
	}
	return usage
}

// TestPagesDoNotDependOnTheClock: the generator's date tag stays off, or every
// run would make the committed pages stale.
func TestPagesDoNotDependOnTheClock(t *testing.T) {
	pages, err := Pages(cli.NewRootCommand(io.Discard, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range pages {
		if strings.Contains(string(p), "Auto generated") {
			t.Errorf("%s carries cobra's dated tag", name)
		}
	}
}

// TestDiff names a stale page, a missing one and one no command renders.
func TestDiff(t *testing.T) {
	want := map[string][]byte{"watchdog.md": []byte("a\nb\n"), "watchdog_check.md": []byte("c\n")}
	committed := map[string][]byte{"watchdog.md": []byte("a\nB\n"), "watchdog_gone.md": []byte("x\n")}
	got := strings.Join(Diff(committed, want), "\n")
	for _, s := range []string{"docs/cli/watchdog.md is stale: first difference, line 2", "docs/cli/watchdog_check.md is missing", "docs/cli/watchdog_gone.md documents no command any more"} {
		if !strings.Contains(got, s) {
			t.Errorf("Diff says:\n%s\nwant a line with %q", got, s)
		}
	}
	if d := Diff(want, want); len(d) != 0 {
		t.Errorf("equal pages differ: %v", d)
	}
}
