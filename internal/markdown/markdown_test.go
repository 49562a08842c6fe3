package markdown

import (
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	const begin, end = "<!-- t:begin -->", "<!-- t:end -->"
	doc := "# Doc\n\nintro\n" + begin + "\nold table\n" + end + "\nafter\n"
	got, err := Replace([]byte(doc), begin, end, "| new |\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# Doc\n\nintro\n" + begin + "\n| new |\n" + end + "\nafter\n"; string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if _, err := Replace([]byte("# no markers\n"), begin, end, "x"); err == nil {
		t.Error("a document without markers was accepted")
	}
	if _, err := Replace([]byte(end+"\n"+begin+"\n"), begin, end, "x"); err == nil {
		t.Error("markers in the wrong order were accepted")
	}
}

func TestCellAndCode(t *testing.T) {
	if got, want := Cell("A | pipe, a `code <x>` span and <url>."), "A \\| pipe, a `code <x>` span and &lt;url&gt;."; got != want {
		t.Errorf("Cell: %q, want %q", got, want)
	}
	for in, want := range map[string]string{`"a|b"`: "`\"a\\|b\"`", "a`b": "``a`b``", "`x`": "`` `x` ``"} {
		if got := Code(in); got != want {
			t.Errorf("Code(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFirstDiff(t *testing.T) {
	if d := FirstDiff([]byte("a\nb\n"), []byte("a\nb\n")); d != "" {
		t.Errorf("equal files differ: %s", d)
	}
	if d := FirstDiff([]byte("a\nb\n"), []byte("a\nc\n")); !strings.Contains(d, "line 2") || !strings.Contains(d, "c") {
		t.Errorf("FirstDiff: %q", d)
	}
	if d := FirstDiff([]byte("a\n"), []byte("a\nb\n")); !strings.Contains(d, "line 2") {
		t.Errorf("a missing line: %q", d)
	}
}
