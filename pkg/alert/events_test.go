package alert

import (
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/decide"
)

var (
	// An Event reason is CamelCase (the API server's convention, what people filter on).
	reasonRE = regexp.MustCompile(`^[A-Z][A-Za-z]+$`)
	// A Prometheus metric-style name, as alertnames are by convention.
	alertnameRE = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	emojiRE     = regexp.MustCompile(`^:[a-z0-9_+-]+:$`)
)

// TestEventTableComplete: every event has every field, no two events share a name,
// an Event reason or an alertname, and only a resolution goes without an alertname.
func TestEventTableComplete(t *testing.T) {
	seen := map[string]map[string]string{"name": {}, "reason": {}, "alertname": {}}
	unique := func(field, value, event string) {
		if other, dup := seen[field][value]; dup {
			t.Errorf("%s %q is used by %s and %s", field, value, other, event)
		}
		seen[field][value] = event
	}
	for _, e := range Events {
		if e.Name == "" {
			t.Errorf("an event without a name: %+v", e)
			continue
		}
		unique("name", e.Name, e.Name)
		if !slices.Contains([]string{SeverityCritical, SeverityWarning, SeverityInfo}, e.Severity) {
			t.Errorf("%s: severity %q", e.Name, e.Severity)
		}
		if !slices.Contains([]Kind{Ongoing, OneShot, Resolution}, e.Kind) {
			t.Errorf("%s: kind %q", e.Name, e.Kind)
		}
		if !reasonRE.MatchString(e.Reason) {
			t.Errorf("%s: Event reason %q", e.Name, e.Reason)
		}
		unique("reason", e.Reason, e.Name)
		switch {
		case e.Kind == Resolution && e.Alertname != "":
			t.Errorf("%s: a resolution resolves the alerts it closes; alertname %q would fire an alert of its own", e.Name, e.Alertname)
		case e.Kind != Resolution && !alertnameRE.MatchString(e.Alertname):
			t.Errorf("%s: alertname %q (an alert without one never reaches Alertmanager)", e.Name, e.Alertname)
		case e.Kind != Resolution:
			unique("alertname", e.Alertname, e.Name)
		}
		if !emojiRE.MatchString(e.Emoji) {
			t.Errorf("%s: Slack emoji %q", e.Name, e.Emoji)
		}
		if len(e.NextStep) < 10 || !strings.HasSuffix(e.NextStep, ".") {
			t.Errorf("%s: next step %q", e.Name, e.NextStep)
		}
		if len(e.When) < 10 {
			t.Errorf("%s: when %q", e.Name, e.When)
		}
		if got, ok := Lookup(e.Name); !ok || got != e {
			t.Errorf("Lookup(%q) = %+v, %v", e.Name, got, ok)
		}
	}
	if _, ok := Lookup("no-such-event"); ok {
		t.Error("Lookup found an unknown event")
	}
}

// TestEveryEventConstantInTable: an Event* name constant declared in this package
// without its literal in Events fails here, so no event can reach a sink without
// its severity, reason, alertname, emoji and next step.
func TestEveryEventConstantInTable(t *testing.T) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, sp := range g.Specs {
			vs := sp.(*ast.ValueSpec)
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Event") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok {
					continue
				}
				name, _ := strconv.Unquote(lit.Value)
				found++
				if _, ok := Lookup(name); !ok {
					t.Errorf("%s = %q has no literal in Events", id.Name, name)
				}
			}
		}
	}
	if found != len(Events) {
		t.Errorf("%d Event constants in events.go, %d events in the table", found, len(Events))
	}
}

// TestPlanUsesTheTable: each event's notification carries its table's severity
// and next step (the sinks render what it carries: pkg/sink's
// TestEverySinkUsesTheTable).
func TestPlanUsesTheTable(t *testing.T) {
	for _, e := range Events {
		n := newNotification(e.Name, nil, decide.Result{}, time.Now(), planning{})
		if n.Severity != e.Severity || n.NextStep != e.NextStep {
			t.Errorf("%s: notification severity %q next step %q", e.Name, n.Severity, n.NextStep)
		}
	}
}
