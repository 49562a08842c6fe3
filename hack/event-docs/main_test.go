package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/watchdog/internal/markdown"
	"github.com/agentenv/watchdog/pkg/alert"
)

const root = "../.."

// TestTablesAreCurrent: the docs' event tables are what pkg/alert/events.go
// generates. Fails when an event was added or changed without regenerating: the
// fix is `make event-docs`.
func TestTablesAreCurrent(t *testing.T) {
	files, err := generate(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if d := markdown.FirstDiff(f.current, f.want); d != "" {
			t.Errorf("%s is not current with pkg/alert/events.go: run `make event-docs`.\nFirst difference, %s", f.path, d)
		}
	}
}

// TestEveryEventDetailed: docs/alerts.md explains, beyond the table's line, when
// each event fires (a "- **`event`**:" entry), so a new event cannot go unexplained.
func TestEveryEventDetailed(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "alerts.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range alert.Events {
		if !strings.Contains(string(doc), "\n- **`"+e.Name+"`**: ") {
			t.Errorf("docs/alerts.md has no \"- **`%s`**: \" entry saying in detail when it fires", e.Name)
		}
	}
}

// TestTablesListEveryEvent: each rendered table has one row per event, with the
// facts of its literal.
func TestTablesListEveryEvent(t *testing.T) {
	for _, tb := range tables {
		out := tb.Render(alert.Events)
		rows := strings.Count(out, "\n") - 2
		if rows != len(alert.Events) {
			t.Errorf("%s: %d rows, %d events", tb.Name, rows, len(alert.Events))
		}
		for _, e := range alert.Events {
			row := ""
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "| `"+e.Name+"` |") {
					row = line
				}
			}
			if row == "" || (e.Alertname != "" && !strings.Contains(row, e.Alertname)) {
				t.Errorf("%s: row for %s: %q", tb.Name, e.Name, row)
			}
		}
	}
}
