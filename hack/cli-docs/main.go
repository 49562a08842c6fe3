// Command cli-docs writes the command-line reference, docs/cli/, one page per
// command, from the commands themselves (internal/clidocs, cobra's doc
// generator). `make cli-docs` runs it; test/docs fails while a committed page
// differs from what it would write.
//
//	go run ./hack/cli-docs            rewrite docs/cli/
//	go run ./hack/cli-docs -check     exit 1 if docs/cli/ is not current
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentenv/watchdog/internal/clidocs"
	"github.com/agentenv/watchdog/pkg/cli"
)

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "do not write: exit 1 if docs/cli/ is not current")
	flag.Parse()
	if err := run(*root, *check); err != nil {
		fmt.Fprintln(os.Stderr, "cli-docs:", err)
		os.Exit(1)
	}
}

func run(root string, check bool) error {
	want, err := clidocs.Pages(cli.NewRootCommand(io.Discard, io.Discard))
	if err != nil {
		return err
	}
	dir := filepath.Join(root, clidocs.Dir)
	committed, err := clidocs.Read(dir)
	if err != nil {
		return err
	}
	if check {
		if diffs := clidocs.Diff(committed, want); len(diffs) > 0 {
			return fmt.Errorf("not current with the commands: run `make cli-docs`:\n%s", strings.Join(diffs, "\n"))
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, b := range want {
		if bytes.Equal(committed[name], b) {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "cli-docs: wrote", filepath.Join(clidocs.Dir, name))
	}
	for name := range committed {
		if _, ok := want[name]; !ok {
			// A page of a command that is gone: only pages the generator owns
			// (clidocs.Read reads those only) are removed.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "cli-docs: removed", filepath.Join(clidocs.Dir, name))
		}
	}
	return nil
}
