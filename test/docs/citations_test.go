package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citationRes find a reference to the tracker instead of the behaviour it asked
// for: the number means nothing to the next reader, and the tracker may not be
// theirs. Run numbers ("FuzzExtract #1"), anchors ("#2-verdicts") and flag
// positions ("--alertmanager-url #2") are not citations.
var citationRes = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\bissues?\s+#?\d+`),
	regexp.MustCompile(`(?i)#\d+,?\s+items?\s+\d`),
	regexp.MustCompile(`(?i)\(\s*#\d+\s*\)`),
	regexp.MustCompile(`(?im)^[ \t]*(//|#)[ \t]*items?[ \t]+\d+[ \t]*[:,]`),
}

// citable are the files a reader of the code, the docs or the chart meets.
func citable(name string) bool {
	switch filepath.Ext(name) {
	case ".go", ".md", ".yaml", ".yml", ".sh", ".tpl", ".txt", ".json":
		return true
	}
	return name == "Makefile" || name == "Dockerfile" || name == "run"
}

// TestNothingCitesAnIssueNumber: comments, tests, docs and chart files say the
// behaviour, not the tracker's number for it. CHANGELOG.md is left out: a
// release note may link what it closes.
func TestNothingCitesAnIssueNumber(t *testing.T) {
	scanned := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch rel {
			case ".git", "bin", "dist", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "CHANGELOG.md" || !citable(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		scanned++
		for _, re := range citationRes {
			for _, loc := range re.FindAllIndex(b, -1) {
				line := 1 + strings.Count(string(b[:loc[0]]), "\n")
				t.Errorf("%s:%d cites an issue number (%q): say the behaviour instead", rel, line, b[loc[0]:loc[1]])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 200 {
		t.Fatalf("only %d files scanned: is the walk rooted at the repository?", scanned)
	}
}

// TestCitationPatterns: the patterns catch the forms citations took and pass the
// numbered things that are not citations.
func TestCitationPatterns(t *testing.T) {
	cites := func(s string) bool {
		for _, re := range citationRes {
			if re.MatchString(s) {
				return true
			}
		}
		return false
	}
	for _, s := range []string{
		"// TestX (is" + "sue 19, item 7): doctor says",
		"(Is" + "sue 17's fix",
		"see (#" + "19 item 7)",
		"fixed in (#" + "42)",
		"// " + "Item 2: a run that could not list the pods",
		"# " + "items 3, 4: the chart",
	} {
		if !cites(s) {
			t.Errorf("%q is not caught", s)
		}
	}
	for _, s := range []string{
		"| FuzzExtract #1 | before the status fix |",
		"[§2](#2-verdicts-evidence-and-actions)",
		`"--alertmanager-url #2"`,
		"the item 3 of the list in the text", // prose, not a leading citation
		"an unbroken hour of healthy observations",
	} {
		if cites(s) {
			t.Errorf("%q is caught, but is not a citation", s)
		}
	}
}
