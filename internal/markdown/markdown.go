// Package markdown writes the generated parts of the docs: Markdown table cells and
// the text between two marker lines of a committed file (hack/chart-readme writes
// the chart's value table, hack/event-docs the event tables).
package markdown

import (
	"fmt"
	"strings"
)

// Code puts s in a code span that survives a table: pipes escaped (GitHub's tables
// split on them even inside code), and a longer fence when s holds backticks.
func Code(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// Cell escapes text for a table cell: pipes everywhere, and < > outside code spans,
// where Markdown would take "<url>" for an HTML tag and hide it.
func Cell(s string) string {
	var b strings.Builder
	inCode := false
	for _, r := range s {
		switch {
		case r == '`':
			inCode = !inCode
			b.WriteRune(r)
		case r == '|':
			b.WriteString(`\|`)
		case r == '<' && !inCode:
			b.WriteString("&lt;")
		case r == '>' && !inCode:
			b.WriteString("&gt;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Replace puts body between the line begin and the line end of doc (both kept).
func Replace(doc []byte, begin, end, body string) ([]byte, error) {
	s := string(doc)
	b := strings.Index(s, begin)
	e := strings.Index(s, end)
	if b < 0 || e < b {
		return nil, fmt.Errorf("no marker lines %q and %q", begin, end)
	}
	return []byte(s[:b+len(begin)] + "\n" + body + s[e:]), nil
}

// FirstDiff names the first line where got and want differ ("" when equal), for a
// test that says how a committed file is stale.
func FirstDiff(got, want []byte) string {
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < max(len(g), len(w)); i++ {
		var a, b string
		if i < len(g) {
			a = g[i]
		}
		if i < len(w) {
			b = w[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n  is:        %s\n  should be: %s", i+1, a, b)
		}
	}
	return ""
}
