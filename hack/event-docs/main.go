// Command event-docs writes the docs' event tables from alert.Events, the one
// definition of every event: the full table and the Alertmanager alertnames in
// docs/alerts.md, the short table in README.md, each between its marker lines.
// `make event-docs` runs it; a test (main_test.go, part of `make test`) fails when
// a committed table differs from what it would write.
//
//	go run ./hack/event-docs            rewrite the tables
//	go run ./hack/event-docs -check     exit 1 if a table is not current
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentenv/watchdog/internal/markdown"
	"github.com/agentenv/watchdog/pkg/alert"
)

// table is one generated table: where it goes and how it is written.
type table struct {
	File   string // relative to the repository's root
	Name   string // names its marker lines
	Render func([]alert.EventSpec) string
}

var tables = []table{
	{File: "docs/alerts.md", Name: "event-table", Render: fullTable},
	{File: "docs/alerts.md", Name: "alertname-table", Render: alertnameTable},
	{File: "README.md", Name: "event-summary", Render: summaryTable},
}

func (t table) markers() (begin, end string) {
	return "<!-- " + t.Name + ":begin: generated from pkg/alert/events.go by `make event-docs`; edit the table there, not here -->",
		"<!-- " + t.Name + ":end -->"
}

func main() {
	root := flag.String("root", ".", "the repository's root")
	check := flag.Bool("check", false, "do not write: exit 1 if a table is not current")
	flag.Parse()
	files, err := generate(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "event-docs:", err)
		os.Exit(1)
	}
	for _, f := range files {
		if bytes.Equal(f.current, f.want) {
			continue
		}
		if *check {
			fmt.Fprintf(os.Stderr, "event-docs: %s is not current with pkg/alert/events.go: run `make event-docs`\n", f.path)
			os.Exit(1)
		}
		if err := os.WriteFile(f.path, f.want, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "event-docs:", err)
			os.Exit(1)
		}
		fmt.Fprintln(os.Stderr, "event-docs: wrote", f.path)
	}
}

type file struct {
	path          string
	current, want []byte
}

// generate returns each file with tables as it is and as it should be.
func generate(root string) ([]file, error) {
	var out []file
	index := map[string]int{}
	for _, t := range tables {
		i, ok := index[t.File]
		if !ok {
			path := filepath.Join(root, t.File)
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			i = len(out)
			index[t.File] = i
			out = append(out, file{path: path, current: b, want: b})
		}
		begin, end := t.markers()
		want, err := markdown.Replace(out[i].want, begin, end, t.Render(alert.Events))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.File, err)
		}
		out[i].want = want
	}
	return out, nil
}

// eventType is the Kubernetes Event's type the watchdog gives an event.
func eventType(e alert.EventSpec) string {
	if e.Severity == alert.SeverityInfo {
		return "Normal"
	}
	return "Warning"
}

func fullTable(events []alert.EventSpec) string {
	var b strings.Builder
	b.WriteString("| event | severity | kind | Kubernetes Event (reason, type) | Alertmanager `alertname` | Slack | when |\n|---|---|---|---|---|---|---|\n")
	for _, e := range events {
		am := "none: resolves what it closes"
		if e.Alertname != "" {
			am = markdown.Code(e.Alertname)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s, %s | %s | %s | %s |\n", markdown.Code(e.Name), e.Severity, e.Kind,
			markdown.Code(e.Reason), eventType(e), am, e.Emoji, markdown.Cell(e.When))
	}
	return b.String()
}

func alertnameTable(events []alert.EventSpec) string {
	var b strings.Builder
	b.WriteString("| event | `alertname` | `severity` | ends |\n|---|---|---|---|\n")
	for _, e := range events {
		switch e.Kind {
		case alert.Ongoing:
			fmt.Fprintf(&b, "| %s | %s | %s | while open: refreshed on every run |\n", markdown.Code(e.Name), markdown.Code(e.Alertname), e.Severity)
		case alert.OneShot:
			fmt.Fprintf(&b, "| %s | %s | %s | one-shot: `--alertmanager-alert-ttl` after it happened |\n", markdown.Code(e.Name), markdown.Code(e.Alertname), e.Severity)
		case alert.Resolution:
			fmt.Fprintf(&b, "| %s | none | | resolves every alert it closes |\n", markdown.Code(e.Name))
		}
	}
	return b.String()
}

func summaryTable(events []alert.EventSpec) string {
	var b strings.Builder
	b.WriteString("| event | severity | Alertmanager `alertname` | when |\n|---|---|---|---|\n")
	for _, e := range events {
		am := "none"
		if e.Alertname != "" {
			am = markdown.Code(e.Alertname)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", markdown.Code(e.Name), e.Severity, am, markdown.Cell(e.When))
	}
	return b.String()
}
