package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
)

// Matcher is one label matcher in Alertmanager's syntax: name, one of = != =~ !~,
// and a value (quoted or not). Regexes are anchored, as Alertmanager anchors them.
type Matcher struct {
	Name, Op, Value string
	re              *regexp.Regexp
}

// matcherRE reads one matcher; ParseMatchers splits a set on the commas outside
// quotes.
var matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*"|[^",]*?)\s*$`)

// ParseMatchers reads a matcher set: matchers joined by commas, optionally in
// braces (`{alertname=~"etcd.*",severity="critical"}`). Every matcher of the set
// must hold for an alert to match it.
func ParseMatchers(set string) ([]Matcher, error) {
	s := strings.TrimSpace(set)
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = s[1 : len(s)-1]
	}
	var out []Matcher
	for _, part := range splitOutsideQuotes(s) {
		m := matcherRE.FindStringSubmatch(part)
		if m == nil {
			return nil, fmt.Errorf("%q is not a matcher (name=value, name!=value, name=~regex, name!~regex)", strings.TrimSpace(part))
		}
		v := m[3]
		if strings.HasPrefix(v, `"`) {
			var err error
			if v, err = strconv.Unquote(v); err != nil {
				return nil, fmt.Errorf("%q: bad quoted value: %v", strings.TrimSpace(part), err)
			}
		}
		mt := Matcher{Name: m[1], Op: m[2], Value: v}
		if mt.Op == "=~" || mt.Op == "!~" {
			re, err := regexp.Compile("^(?:" + v + ")$")
			if err != nil {
				return nil, fmt.Errorf("%q: %v", strings.TrimSpace(part), err)
			}
			mt.re = re
		}
		out = append(out, mt)
	}
	if len(out) == 0 {
		return nil, errors.New("no matcher")
	}
	return out, nil
}

func splitOutsideQuotes(s string) []string {
	var parts []string
	start, quoted := 0, false
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == ',' && !quoted:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

func (m Matcher) String() string { return m.Name + m.Op + strconv.Quote(m.Value) }

// Matches reports whether the labels satisfy m (a missing label is "").
func (m Matcher) Matches(labels map[string]string) bool {
	v := labels[m.Name]
	switch m.Op {
	case "=":
		return v == m.Value
	case "!=":
		return v != m.Value
	case "=~":
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

// SetString renders a matcher set as Alertmanager writes it.
func SetString(set []Matcher) string {
	parts := make([]string, len(set))
	for i, m := range set {
		parts[i] = m.String()
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// maxAlertsBody bounds the answer read from Alertmanager.
const maxAlertsBody = 4 << 20

// gettableAlert is what the hold reads of Alertmanager's GET /api/v2/alerts.
type gettableAlert struct {
	Labels map[string]string `json:"labels"`
}

// Firing asks Alertmanager for the active alerts (neither silenced nor inhibited)
// that match any of sets, leaving out the watchdog's own alerts (a wide matcher
// must not hold restarts because the scheduler is wedged). The peers are asked in
// turn; the first that answers is believed (peers gossip silences, and each
// receives the same alerts from Prometheus). The filter is sent to Alertmanager
// and applied again here.
func (a *Alertmanager) Firing(ctx context.Context, sets [][]Matcher) ([]string, error) {
	h := a.headers()
	h.Set("Accept", "application/json")
	var errs []error
	for _, p := range a.Posters {
		firing, err := a.firingAt(ctx, p, sets, h)
		if err == nil {
			return firing, nil
		}
		errs = append(errs, err)
	}
	return nil, errors.Join(errs...)
}

func (a *Alertmanager) firingAt(ctx context.Context, p *Poster, sets [][]Matcher, h http.Header) ([]string, error) {
	own := map[string]bool{}
	for _, s := range alert.Events {
		if s.Alertname != "" {
			own[s.Alertname] = true
		}
	}
	found := map[string]bool{}
	for _, set := range sets {
		q := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}}
		for _, m := range set {
			q.Add("filter", m.String())
		}
		body, err := p.Get(ctx, p.url+"?"+q.Encode(), h, maxAlertsBody)
		if err != nil {
			return nil, err
		}
		var alerts []gettableAlert
		if err := json.Unmarshal(body, &alerts); err != nil {
			return nil, fmt.Errorf("%s: answer is not a list of alerts: %v", p.name, err)
		}
		for _, al := range alerts {
			matches := !slices.ContainsFunc(set, func(m Matcher) bool { return !m.Matches(al.Labels) })
			if own[al.Labels["alertname"]] || !matches {
				continue
			}
			found[describe(al.Labels)] = true
		}
	}
	return slices.Sorted(maps.Keys(found)), nil
}

// describe names an alert as alertname{the other labels}.
func describe(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if k != "alertname" {
			parts = append(parts, k+"="+strconv.Quote(labels[k]))
		}
	}
	return labels["alertname"] + "{" + strings.Join(parts, ",") + "}"
}

// AlertHold reads the firing alerts that hold restarts, for the pass.
type AlertHold struct {
	Alertmanager *Alertmanager
	Sets         [][]Matcher
}

// Read asks Alertmanager; an error is kept in the answer (the gate fails open).
func (h *AlertHold) Read(ctx context.Context) *decide.FiringAlerts {
	var names []string
	for _, s := range h.Sets {
		names = append(names, SetString(s))
	}
	firing, err := h.Alertmanager.Firing(ctx, h.Sets)
	return &decide.FiringAlerts{Matchers: strings.Join(names, " or "), Firing: firing, Err: err}
}
