// Package docs checks the project's documents as a new user meets them: links that
// resolve, the project files a legal review and an operator look for, and tables that
// name the versions the tests really use.
package docs

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const root = "../.."

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// markdownFiles are the documents a reader follows links through.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.md", "docs/*.md", "docs/cli/*.md", "charts/*/README.md"} {
		m, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			rel, _ := filepath.Rel(root, f)
			files = append(files, rel)
		}
	}
	if len(files) < 10 {
		t.Fatalf("only %d markdown files found: %v", len(files), files)
	}
	return files
}

var (
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile("(?m)^#{1,6} (.+)$")
	fenceRe   = regexp.MustCompile("(?ms)^```.*?^```")
)

// slug is GitHub's heading anchor: lower case, punctuation other than '-' and '_'
// dropped, spaces as '-'.
func slug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func anchors(doc string) map[string]bool {
	set := map[string]bool{}
	count := map[string]int{}
	for _, m := range headingRe.FindAllStringSubmatch(fenceRe.ReplaceAllString(doc, ""), -1) {
		s := slug(m[1])
		if n := count[s]; n > 0 {
			set[s+"-"+string(rune('0'+n))] = true
		}
		count[s]++
		set[s] = true
	}
	return set
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Defaults for a `*/5` CronJob":             "defaults-for-a-5-cronjob",
		"2. Verdicts, evidence and actions":        "2-verdicts-evidence-and-actions",
		"Preflight: `watchdog doctor`":             "preflight-watchdog-doctor",
		"`helm test`: `watchdog doctor`":           "helm-test-watchdog-doctor",
		"Building the binary and the image":        "building-the-binary-and-the-image",
		"Slack payload types: local, not slack-go": "slack-payload-types-local-not-slack-go",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestLinksResolve: every relative link of every document names a file that exists
// and, with #anchor, a heading of that file. Sections move (the README's decision
// internals went to docs/design.md); links must follow them.
func TestLinksResolve(t *testing.T) {
	checked := 0
	for _, file := range markdownFiles(t) {
		doc := read(t, file)
		for _, m := range linkRe.FindAllStringSubmatch(fenceRe.ReplaceAllString(doc, ""), -1) {
			link := m[1]
			if strings.Contains(link, "://") || strings.HasPrefix(link, "mailto:") {
				continue
			}
			target, anchor, _ := strings.Cut(link, "#")
			targetPath := file
			if target != "" {
				targetPath = filepath.Join(filepath.Dir(file), target)
				if _, err := os.Stat(filepath.Join(root, targetPath)); err != nil {
					t.Errorf("%s: link %q: %v", file, link, err)
					continue
				}
			}
			checked++
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(targetPath, ".md") {
				t.Errorf("%s: link %q: an anchor into a file that is not markdown", file, link)
				continue
			}
			if !anchors(read(t, targetPath))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", file, link, targetPath, anchor)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("only %d relative links checked: the link pattern is broken", checked)
	}
}

// wordBudget caps the words a reader of README.md and docs/ (without the generated
// docs/cli) meets: the docs were cut by a third without dropping a fact, each fact
// said once; a new fact should replace wordier prose, not pile on.
const wordBudget = 25600

func TestDocsWordBudget(t *testing.T) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "cli" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, _ := filepath.Rel(root, path)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	type count struct {
		file  string
		words int
	}
	var counts []count
	total := 0
	for _, f := range files {
		n := len(strings.Fields(read(t, f))) // what `wc -w` counts
		counts = append(counts, count{f, n})
		total += n
	}
	if len(counts) < 8 || total < 10000 {
		t.Fatalf("only %d words in %d files: the walk missed the docs", total, len(counts))
	}
	if total <= wordBudget {
		return
	}
	sort.Slice(counts, func(i, j int) bool { return counts[i].words > counts[j].words })
	var biggest []string
	for _, c := range counts[:3] {
		biggest = append(biggest, fmt.Sprintf("%s %d", c.file, c.words))
	}
	t.Errorf("README.md + docs/ (without docs/cli) have %d words, over the budget of %d: say each fact once and tighten prose; biggest: %s",
		total, wordBudget, strings.Join(biggest, ", "))
}
