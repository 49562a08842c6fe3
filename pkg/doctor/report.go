package doctor

import (
	"io"
	"strings"

	"github.com/agentenv/watchdog/pkg/termtext"
)

// Report is what `watchdog doctor` prints.
type Report struct {
	OK        bool     `json:"ok"` // no check failed (skipped checks do not count)
	Failed    int      `json:"failed"`
	Warnings  int      `json:"warnings"`
	Skipped   int      `json:"skipped"`
	Namespace string   `json:"namespace"`
	Host      string   `json:"apiServer"`
	Checks    []Result `json:"checks"`
}

// NewReport summarizes results.
func NewReport(namespace, host string, results []Result) *Report {
	r := &Report{Namespace: namespace, Host: host, Checks: append([]Result{}, results...)} // [] in JSON
	count := map[string]*int{MarkFail: &r.Failed, MarkSkip: &r.Skipped, MarkWarn: &r.Warnings}
	for _, c := range results {
		if n := count[c.mark()]; n != nil {
			*n++
		}
	}
	r.OK = r.Failed == 0
	return r
}

// Marks of passed, failed and skipped checks.
const (
	MarkOK   = "✓"
	MarkFail = "✗"
	MarkSkip = "-"
	MarkWarn = "!"
)

// mark says whether the check failed, was skipped, passed with a warning or passed.
func (c Result) mark() string {
	switch {
	case !c.OK:
		return MarkFail
	case c.Skipped:
		return MarkSkip
	case c.Warning:
		return MarkWarn
	}
	return MarkOK
}

// WriteText writes the report for people: a heading per group, a line per check,
// the fix under each failed one, and a summary.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	termtext.Fprintf(&b, "watchdog doctor: namespace %s, API server %s\n", r.Namespace, r.Host)
	group := ""
	for _, c := range r.Checks {
		if c.Group != group {
			group = c.Group
			termtext.Fprintf(&b, "\n%s\n%s\n", group, strings.Repeat("-", len(group)))
		}
		termtext.Fprintf(&b, "%s %s", c.mark(), c.Name)
		if c.Skipped {
			b.WriteString(" (skipped)")
		}
		if c.Detail != "" {
			termtext.Fprintf(&b, ": %s", c.Detail)
		}
		b.WriteByte('\n')
		if (!c.OK || c.Warning) && c.Hint != "" {
			termtext.Fprintf(&b, "    fix: %s\n", c.Hint)
		}
	}
	b.WriteByte('\n')
	total := len(r.Checks)
	switch {
	case r.OK && r.Warnings > 0:
		termtext.Fprintf(&b, "%s all %d checks passed, %d with a warning (%d skipped)\n", MarkWarn, total-r.Skipped, r.Warnings, r.Skipped)
	case r.OK:
		termtext.Fprintf(&b, "%s all %d checks passed (%d skipped)\n", MarkOK, total-r.Skipped, r.Skipped)
	default:
		termtext.Fprintf(&b, "%s %d of %d checks failed (%d skipped)\n", MarkFail, r.Failed, total-r.Skipped, r.Skipped)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
