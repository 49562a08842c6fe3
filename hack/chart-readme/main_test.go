package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentenv/watchdog/internal/markdown"
)

// TestREADMEIsCurrent: the chart's README shows exactly the values and comments of
// its values.yaml. Fails when a value was added, removed, renamed, re-defaulted or
// re-described without regenerating: the fix is `make chart-readme`.
func TestREADMEIsCurrent(t *testing.T) {
	chart := filepath.Join("..", "..", "charts", "agentenv-scheduler-watchdog")
	current, want, err := generate(chart)
	if err != nil {
		t.Fatal(err)
	}
	if d := markdown.FirstDiff(current, want); d != "" {
		t.Fatalf("charts/agentenv-scheduler-watchdog/README.md is not current with values.yaml: run `make chart-readme`.\nFirst difference, %s", d)
	}
}

func TestParseValues(t *testing.T) {
	const values = `# File header, for readers of the file only.

# Not a description: no "--".
# -- The mode.
#   cronjob: every 5 minutes.
mode: cronjob
plain: 3
# -- A group.
group:
  # -- A | pipe, a ` + "`code <x>`" + ` span and <url>.
  leaf: "a|b"
  # -- Detached by a blank line: describes nothing.

  # an ordinary comment
  list: [1, 2]
  empty: {}
undocumented:
  child: true
  ratio: 0.5
  none: null
`
	rows, err := parseValues([]byte(values))
	if err != nil {
		t.Fatal(err)
	}
	want := []row{
		{"mode", "string", `"cronjob"`, "The mode. cronjob: every 5 minutes."},
		{"plain", "int", "3", ""},
		{"group", "object", "", "A group."},
		{"group.leaf", "string", `"a|b"`, "A | pipe, a `code <x>` span and <url>."},
		{"group.list", "list", "[1,2]", ""},
		{"group.empty", "object", "{}", ""},
		{"undocumented.child", "bool", "true", ""},
		{"undocumented.ratio", "float", "0.5", ""},
		{"undocumented.none", "null", "null", ""},
	}
	if len(rows) != len(want) {
		t.Fatalf("got %d rows %+v, want %d", len(rows), rows, len(want))
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, rows[i], want[i])
		}
	}
	tab := table(rows)
	for _, line := range []string{
		"| `group.leaf` | string | `\"a\\|b\"` | A \\| pipe, a `code <x>` span and &lt;url&gt;. |",
		"| `group` | object |  | A group. |",
	} {
		if !strings.Contains(tab, line+"\n") {
			t.Errorf("table lacks %q:\n%s", line, tab)
		}
	}
}
