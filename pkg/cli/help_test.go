package cli

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/agentenv/watchdog/pkg/version"
)

// commands lists every command of the tree that does something (not the groups).
func commands(root *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Runnable() && c != root && c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// exampleCommands returns the watchdog invocations in an Example: each line that runs
// watchdog, without leading VAR=value assignments, cut at a pipe or a comment, split
// into arguments (quotes removed, as a shell would).
func exampleCommands(example string) [][]string {
	var out [][]string
	for _, line := range strings.Split(example, "\n") {
		args := shellWords(line)
		for len(args) > 0 && strings.Contains(args[0], "=") && !strings.HasPrefix(args[0], "-") {
			args = args[1:]
		}
		if len(args) == 0 || args[0] != "watchdog" {
			continue
		}
		out = append(out, args[1:])
	}
	return out
}

func shellWords(line string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '|' || r == '#':
			if inWord {
				words = append(words, cur.String())
			}
			return words
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestEveryCommandSaysItsExitCodes: a script author reads the exit codes in each
// command's own help (before: only check and doctor said them).
func TestEveryCommandSaysItsExitCodes(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	for _, c := range append(commands(root), root) {
		if !strings.Contains(c.Long, "Exit codes") || !strings.Contains(c.Long, "2 ") {
			t.Errorf("%q's help does not give its exit codes:\n%s", c.CommandPath(), c.Long)
		}
	}
}

// TestEveryCommandHasExamples: each command's help has an Example section, and every
// watchdog command line in it is one the command accepts (so examples do not rot
// when flags are renamed).
func TestEveryCommandHasExamples(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	cmds := commands(root)
	if len(cmds) < 5 {
		t.Fatalf("found only %d commands", len(cmds))
	}
	for _, c := range cmds {
		t.Run(c.CommandPath(), func(t *testing.T) {
			if strings.TrimSpace(c.Example) == "" {
				t.Fatalf("%q has no Example: section: add one (cobra.Command.Example) showing how it is run", c.CommandPath())
			}
			lines := exampleCommands(c.Example)
			if len(lines) == 0 {
				t.Fatalf("%q's Example runs no watchdog command:\n%s", c.CommandPath(), c.Example)
			}
			for _, args := range lines {
				// Resolve and parse on a fresh tree: flags keep their values.
				fresh := NewRootCommand(io.Discard, io.Discard)
				target, rest, err := fresh.Find(args)
				if err != nil {
					t.Errorf("example %q: %v", args, err)
					continue
				}
				if target.CommandPath() != c.CommandPath() && !(target == fresh && c.Name() == "version") {
					t.Errorf("example %q in %q's help runs %q", args, c.CommandPath(), target.CommandPath())
				}
				if err := target.ParseFlags(rest); err != nil {
					t.Errorf("example %q: %v", args, err)
				}
			}
		})
	}
}

func TestExampleCommandsParsing(t *testing.T) {
	got := exampleCommands(`  # comment: watchdog check
  WATCHDOG_X=1 A=b watchdog check -n ns --x "a b" | jq '.v' # trailing
  kubectl get pods
  watchdog --version   # the same`)
	want := [][]string{{"check", "-n", "ns", "--x", "a b"}, {"--version"}}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if strings.Join(got[i], "\x00") != strings.Join(want[i], "\x00") {
			t.Errorf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
}

// TestNamespaceShorthand: -n is --namespace on every command that has one, as in
// kubectl.
func TestNamespaceShorthand(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	seen := 0
	for _, c := range commands(root) {
		f := c.Flags().Lookup("namespace")
		if f == nil {
			continue
		}
		seen++
		if f.Shorthand != "n" {
			t.Errorf("%s: --namespace has shorthand %q, want -n", c.CommandPath(), f.Shorthand)
			continue
		}
		if err := c.ParseFlags([]string{"-n", "team-a"}); err != nil {
			t.Fatalf("%s -n team-a: %v", c.CommandPath(), err)
		}
		if f.Value.String() != "team-a" {
			t.Errorf("%s -n team-a set --namespace to %q", c.CommandPath(), f.Value.String())
		}
	}
	if seen < 4 {
		t.Errorf("--namespace found on %d commands, want at least check, run, status and notify test", seen)
	}
}

// TestNamespaceShorthandReachesValidation: -n feeds the same option as --namespace
// (a bad value is refused naming --namespace, exit 2).
func TestNamespaceShorthandReachesValidation(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := ExecuteContext(context.Background(), []string{"status", "-n", "Not_A_Namespace"}, &stdout, &stderr)
	if code != ExitUsage || !strings.Contains(stderr.String(), `--namespace "Not_A_Namespace"`) {
		t.Errorf("status -n Not_A_Namespace: exit %d\n%s", code, stderr.String())
	}
}

// TestVersionFlag: `watchdog --version` prints exactly what `watchdog version` does.
func TestVersionFlag(t *testing.T) {
	run := func(args ...string) (string, int) {
		var stdout, stderr bytes.Buffer
		code := ExecuteContext(context.Background(), args, &stdout, &stderr)
		if stderr.Len() > 0 {
			t.Errorf("%q wrote to stderr: %s", args, stderr.String())
		}
		return stdout.String(), code
	}
	cmd, code := run("version")
	if code != ExitOK || cmd != version.String()+"\n" {
		t.Fatalf("watchdog version: exit %d, %q", code, cmd)
	}
	flag, code := run("--version")
	if code != ExitOK || flag != cmd {
		t.Errorf("watchdog --version: exit %d, %q; want %q as watchdog version prints", code, flag, cmd)
	}
}

// TestFlagArgumentNames: pflag turns the first `quoted` word of a usage into the
// flag's argument name in --help. Each shown flag's argument name is a real one: one
// word (no sentence fragment a quote in the usage made the name), and none for a
// boolean.
func TestFlagArgumentNames(t *testing.T) {
	word := regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9=._-]*$`)
	for _, c := range commands(NewRootCommand(io.Discard, io.Discard)) {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden {
				return
			}
			name, _ := pflag.UnquoteUsage(f)
			switch {
			case f.Value.Type() == "bool" && name != "":
				t.Errorf("%s --%s: a boolean shows the argument %q", c.CommandPath(), f.Name, name)
			case f.Value.Type() != "bool" && !word.MatchString(name):
				t.Errorf("%s --%s: argument name %q", c.CommandPath(), f.Name, name)
			}
		})
	}
}

// TestUsageErrorPointsAtHelp: a usage error names the help of the command that
// refused it.
func TestUsageErrorPointsAtHelp(t *testing.T) {
	for _, c := range []struct {
		args []string
		help string
	}{
		{[]string{"doctor", "--no-such-flag"}, "watchdog doctor --help"},
		{[]string{"notify", "test", "--timeout", "0s", "--webhook-url", "https://127.0.0.1:9/x"}, "watchdog notify test --help"},
		{[]string{"check", "--output", "yaml"}, "watchdog check --help"},
		{[]string{"no-such-command"}, "watchdog --help"},
	} {
		var stderr bytes.Buffer
		if code := ExecuteContext(context.Background(), c.args, io.Discard, &stderr); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d", c.args, code, ExitUsage)
		}
		if want := "Run '" + c.help + "' for usage."; !strings.Contains(stderr.String(), want) {
			t.Errorf("%v: %q lacks %q", c.args, stderr.String(), want)
		}
	}
}

// TestFlagsShownApply: doctor accepts every flag of check (it reads the same
// WATCHDOG_* variables as the CronJob) but shows only those that change a check; the
// Pushgateway flags are check's alone.
func TestFlagsShownApply(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	cmd := func(path ...string) *cobra.Command {
		c, _, err := root.Find(path)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	doctor := cmd("doctor")
	for _, name := range doctorHidden {
		f := doctor.Flags().Lookup(name)
		if f == nil || !f.Hidden {
			t.Errorf("doctor --%s: %+v, want accepted and hidden", name, f)
		}
	}
	var help bytes.Buffer
	doctor.SetOut(&help)
	if err := doctor.Help(); err != nil {
		t.Fatal(err)
	}
	shown := func(name string) bool {
		// A flag's own line, not a wrapped usage text that names it.
		return regexp.MustCompile(`(?m)^(  -[a-z], |      )--` + name + `\s`).MatchString(help.String())
	}
	for _, name := range doctorHidden {
		if shown(name) {
			t.Errorf("doctor --help shows --%s", name)
		}
	}
	for _, name := range []string{"max-restarts", "restart-method", "scheduler-selector", "send-test"} {
		if !shown(name) {
			t.Errorf("doctor --help lacks --%s, which changes its checks", name)
		}
	}
	for _, path := range [][]string{{"run"}, {"doctor"}, {"status"}, {"notify", "test"}} {
		if cmd(path...).Flags().Lookup("pushgateway-url") != nil {
			t.Errorf("%v has --pushgateway-url", path)
		}
	}
	if cmd("check").Flags().Lookup("pushgateway-url") == nil {
		t.Error("check has no --pushgateway-url")
	}
}

// Every line of every command's --help fits in 100 columns: a terminal of that
// width shows each flag on one line.
func TestHelpFitsIn100Columns(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	for _, c := range append(commands(root), root) {
		var b bytes.Buffer
		c.SetOut(&b)
		if err := c.Help(); err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(b.String(), "\n") {
			if n := len([]rune(line)); n > 100 {
				t.Errorf("%s --help: %d columns: %s", c.CommandPath(), n, line)
			}
		}
	}
}

// check's help lists its flags in groups, the common ones first.
func TestCheckHelpCommonFlagsFirst(t *testing.T) {
	root := NewRootCommand(io.Discard, io.Discard)
	check, _, err := root.Find([]string{"check"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	check.SetOut(&b)
	if err := check.Help(); err != nil {
		t.Fatal(err)
	}
	help := b.String()
	common := strings.Index(help, "Common flags:")
	if common < 0 || strings.Index(help, "Decision flags:") < common {
		t.Fatalf("check --help does not start its flags with the common ones:\n%s", help)
	}
	for _, name := range checkFlagGroups[0].flags[:5] {
		if i := strings.Index(help[common:], "--"+name+" "); i < 0 || common+i > strings.Index(help, "Decision flags:") {
			t.Errorf("--%s is not among the common flags", name)
		}
	}
	if i := strings.Index(help[common:], "--startup-grace"); common+i < strings.Index(help, "Decision flags:") {
		t.Error("--startup-grace listed before the decision flags")
	}
}
