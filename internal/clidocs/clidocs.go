// Package clidocs renders the command-line reference, one Markdown page per
// command, from the cobra commands themselves with cobra's doc generator: a flag
// added to a command is documented by construction. hack/cli-docs writes the pages
// into docs/cli/; test/docs fails while the committed pages differ.
package clidocs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/agentenv/watchdog/internal/markdown"
)

// Dir is where the pages live, relative to the repository's root.
const Dir = "docs/cli"

// header opens every page: it is generated, and from where.
const header = "<!-- generated from the commands (pkg/cli) by `make cli-docs`; edit the command's help there, not here -->\n\n"

// Pages renders root and every command under it that `--help` lists: file name
// (watchdog_check.md) → content. The result depends on the commands only, never on
// the clock or the environment, so that a committed copy can be checked.
func Pages(root *cobra.Command) (map[string][]byte, error) {
	root.DisableAutoGenTag = true // the tag carries the date: every run would differ
	pages := map[string][]byte{}
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		// As doc.GenMarkdownTree chooses: the commands a user can run. The root is
		// always a page (it is not "available": it has no Run of its own).
		if c != root && (!c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand()) {
			return nil
		}
		var b bytes.Buffer
		b.WriteString(header)
		if err := doc.GenMarkdownCustom(c, &b, link); err != nil {
			return fmt.Errorf("rendering %q: %w", c.CommandPath(), err)
		}
		pages[FileName(c)] = b.Bytes()
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return pages, nil
}

// FileName is a command's page, named as cobra's doc generator names it.
func FileName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "_") + ".md"
}

// link keeps the generator's relative links (pages sit side by side).
func link(name string) string { return name }

// Diff compares the committed pages (file name → content) with the rendered ones
// and names every difference: a stale page with its first differing line, a missing
// page, a page no command renders any more. Empty when they match.
func Diff(committed, want map[string][]byte) []string {
	var out []string
	for name, w := range want {
		c, ok := committed[name]
		switch {
		case !ok:
			out = append(out, filepath.Join(Dir, name)+" is missing")
		default:
			if d := markdown.FirstDiff(c, w); d != "" {
				out = append(out, filepath.Join(Dir, name)+" is stale: first difference, "+d)
			}
		}
	}
	for name := range committed {
		if _, ok := want[name]; !ok {
			out = append(out, filepath.Join(Dir, name)+" documents no command any more")
		}
	}
	sort.Strings(out)
	return out
}

// Read returns the committed pages of dir: its *.md files (none when dir does not
// exist yet).
func Read(dir string) (map[string][]byte, error) {
	pages := map[string][]byte{}
	names, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		return nil, err
	}
	for _, path := range names {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("reading the committed reference: %w", err)
		}
		pages[filepath.Base(path)] = b
	}
	return pages, nil
}
