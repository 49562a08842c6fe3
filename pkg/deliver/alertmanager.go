package deliver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	amlabels "github.com/prometheus/alertmanager/pkg/labels"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/httpbound"
	"github.com/agentenv/watchdog/pkg/state"
)

// AlertmanagerAPIPath is appended to each --alertmanager-url.
const AlertmanagerAPIPath = "/api/v2/alerts"

// DefaultAlertmanagerTTL is how long an alert not posted again stays active: a failed run must not resolve it.
const DefaultAlertmanagerTTL = 15 * time.Minute

// PostableAlert is one element of the body of Alertmanager's POST /api/v2/alerts.
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Alertmanager posts every notification to each peer of an HA group (peers share silences, not alerts):
// one accepting is a delivery; one that missed an ongoing alert gets the next refresh (docs/alerts.md, "HA").
type Alertmanager struct {
	Posters                         []*Poster // one per URL, for <url>/api/v2/alerts
	Username, Password, BearerToken string    // basic auth, or a bearer token
	TTL                             time.Duration
	RunbookURL, GeneratorURL        string
	Source                          alert.Source    // labels refreshed alerts (notifications carry their own)
	Warn                            func(err error) // told of a failed peer when another accepted
}

// NewAlertmanager builds the sink for urls; errors name "alertmanager[i]" (1-based), never a URL.
func NewAlertmanager(urls []string, attemptTimeout time.Duration, attempts int, budget time.Duration) (*Alertmanager, error) {
	am := &Alertmanager{TTL: DefaultAlertmanagerTTL, Warn: func(error) {}}
	for i, raw := range urls {
		name := "alertmanager"
		if len(urls) > 1 {
			name = fmt.Sprintf("alertmanager[%d]", i+1)
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: invalid URL", name) // the URL may hold credentials
		}
		// A URL given with the API path already is taken as is.
		if !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), AlertmanagerAPIPath) {
			u = u.JoinPath(AlertmanagerAPIPath)
		}
		am.Posters = append(am.Posters, NewPoster(name, u.String(), attemptTimeout, attempts, budget))
	}
	return am, nil
}

func (a *Alertmanager) Name() string { return "alertmanager" }

// Reach checks the path to every peer.
func (a *Alertmanager) Reach(ctx context.Context) error {
	var errs []error
	for _, p := range a.Posters {
		errs = append(errs, p.Reach(ctx))
	}
	return errors.Join(errs...)
}

// Send posts n's alert, or for recovered the resolution of every alert it closes.
func (a *Alertmanager) Send(ctx context.Context, n alert.Notification) error {
	if alert.Spec(n.Event).Kind != alert.Resolution && alert.Spec(n.Event).Alertname == "" { // not "delivered"
		return fmt.Errorf("alertmanager: event %q has no alertname: not sent", n.Event)
	}
	return a.post(ctx, a.Alerts(n))
}

// Refresh posts every open ongoing alert again, to keep it active while it lasts, and says how many.
func (a *Alertmanager) Refresh(ctx context.Context, open map[string]*state.Alert, now time.Time) (int, error) {
	var alerts []PostableAlert
	for _, ev := range slices.Sorted(maps.Keys(open)) {
		o, spec := open[ev], alert.Spec(ev)
		if spec.Kind != alert.Ongoing { // each has an alertname (TestEventTableComplete)
			continue
		}
		n := alert.Notification{Event: ev, Severity: spec.Severity, Pod: o.Pod, NextStep: spec.NextStep,
			Reason: fmt.Sprintf("%s, open since %s: %s", ev, o.OpenedAt.UTC().Format(time.RFC3339), spec.When)}
		a.Source.Stamp(&n)
		alerts = append(alerts, a.alert(n, o.OpenedAt, now.Add(a.TTL)))
	}
	return len(alerts), a.post(ctx, alerts)
}

// Alerts renders n, of a known event, as the postable alerts Send posts.
func (a *Alertmanager) Alerts(n alert.Notification) []PostableAlert {
	if alert.Spec(n.Event).Kind == alert.Resolution {
		var out []PostableAlert
		for _, c := range n.Closes {
			if alert.Spec(c.Event).Alertname == "" { // an older build's outbox: its alert ends with its TTL
				continue
			}
			closed := alert.Notification{Event: c.Event, Severity: alert.Spec(c.Event).Severity, Cluster: n.Cluster, Namespace: n.Namespace, Labels: n.Labels,
				Pod: c.Pod, Reason: "resolved: " + n.Reason, NextStep: alert.Spec(alert.EventRecovered).NextStep}
			out = append(out, a.alert(closed, c.OpenedAt, n.Time))
		}
		return out
	}
	// From the alert's own time: a retry long after must not fire for a full TTL again.
	return []PostableAlert{a.alert(n, n.Time, n.Time.Add(a.TTL))}
}

// alert builds one postable alert. Its labels are its identity (Alertmanager's
// fingerprint): only what is stable while a problem lasts, no reason or time.
func (a *Alertmanager) alert(n alert.Notification, startsAt, endsAt time.Time) PostableAlert {
	labels := map[string]string{}
	maps.Copy(labels, n.Labels) // the operator's, under the watchdog's own
	maps.Copy(labels, map[string]string{"alertname": alert.Spec(n.Event).Alertname, "severity": n.Severity,
		"event": n.Event, "namespace": n.Namespace})
	for k, v := range map[string]string{"cluster": n.Cluster, "pod": n.Pod} {
		if v != "" {
			labels[k] = v
		}
	}
	summary := fmt.Sprintf("AgentENV scheduler %s in %s", n.Event, where(n)) + tagIf(n.Pod != "", " (pod "+n.Pod+")")
	if n.Test {
		summary = "Watchdog test alert (not a real incident) for " + where(n)
	}
	if n.Shadow {
		labels["shadow"] = "true" // routes can send shadow mode's alerts elsewhere
	}
	desc := n.Reason + tagIf(n.NextStep != "", "\n\nNext step: "+n.NextStep)
	ann := map[string]string{"description": state.Truncate(desc, 4000),
		"summary": tagIf(n.Paused != "", "[paused] ") + tagIf(n.Shadow, "[shadow] ") + summary}
	if n.Paused != "" { // not a label: that would make it another alert once the pause ends
		ann["paused"] = state.Truncate(n.Paused, 1000)
	}
	if a.RunbookURL != "" {
		ann["runbook_url"] = a.RunbookURL
	}
	if !endsAt.After(startsAt) { // Alertmanager rejects an alert that ends before it starts
		endsAt = startsAt.Add(time.Second)
	}
	return PostableAlert{Labels: labels, Annotations: ann, StartsAt: startsAt.UTC(), EndsAt: endsAt.UTC(), GeneratorURL: a.GeneratorURL}
}

// headers carry the credentials, which every poster's errors then redact.
func (a *Alertmanager) headers() http.Header {
	h := http.Header{}
	switch {
	case a.BearerToken != "":
		h.Set("Authorization", "Bearer "+a.BearerToken)
	case a.Username != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(a.Username+":"+a.Password)))
	}
	for _, p := range a.Posters { // an error page may echo the request's headers
		p.AddSecrets(h.Get("Authorization"), strings.TrimPrefix(h.Get("Authorization"), "Basic "), a.BearerToken, a.Password)
	}
	return h
}

// post sends alerts to every peer at once (a hung one must not use the others' time).
func (a *Alertmanager) post(ctx context.Context, alerts []PostableAlert) error {
	if len(alerts) == 0 { // a recovered that closes nothing this sink knows of; no open alert
		return nil
	}
	body, err := json.Marshal(alerts)
	if err != nil {
		return fmt.Errorf("alertmanager: encode: %w", err)
	}
	h := a.headers()
	h.Set("Content-Type", "application/json")
	errs := make([]error, len(a.Posters))
	var wg sync.WaitGroup
	for i, p := range a.Posters {
		wg.Go(func() { errs[i] = p.Post(ctx, body, h) })
	}
	wg.Wait()
	var failed []string
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	switch err := errors.New(strings.Join(failed, "; ")); {
	case len(failed) > 0 && len(failed) == len(a.Posters):
		return err
	case len(failed) > 0 && a.Warn != nil:
		a.Warn(err)
	}
	return nil
}

// ParseMatchers reads a matcher set with Alertmanager's own parser,
// `{alertname=~"etcd.*",severity="critical"}`: an alert matches when every matcher holds.
func ParseMatchers(set string) (amlabels.Matchers, error) {
	ms, err := amlabels.ParseMatchers(strings.TrimSpace(set))
	if err == nil && len(ms) == 0 {
		err = errors.New("no matcher (name=value, name!=value, name=~regex, name!~regex)")
	}
	return ms, err
}

// holdPeerBytes bounds what the hold reads of one peer's answers.
const holdPeerBytes = 1 << 20

// ChartWedgeRules, the chart's alerts about the wedge a restart is for, never hold it.
var ChartWedgeRules = []string{"AgentenvSchedulerWedgedTooLong", "AgentenvSchedulerDiscoveryWedged"}

// AlertHold reads the firing alerts that hold restarts, for the pass.
type AlertHold struct {
	Alertmanager *Alertmanager
	Sets         []amlabels.Matchers
}

// Read asks every peer at once for the active alerts (neither silenced nor inhibited) matching any set,
// but the watchdog's own and ChartWedgeRules (a wide matcher must not hold restarts because the scheduler
// is wedged); the first peer to answer is believed (peers gossip silences). An error is in the answer (the
// gate fails open).
func (h *AlertHold) Read(ctx context.Context) *decide.FiringAlerts {
	var names []string
	for _, s := range h.Sets {
		names = append(names, s.String())
	}
	out := &decide.FiringAlerts{Matchers: strings.Join(names, " or ")}
	hdr := h.Alertmanager.headers()
	hdr.Set("Accept", "application/json")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	peers := h.Alertmanager.Posters
	firing, errs, answered := make([]map[string]bool, len(peers)), make([]error, len(peers)), make(chan int, len(peers))
	for i, p := range peers {
		go func() {
			firing[i], errs[i] = h.firingAt(ctx, p, hdr)
			answered <- i
		}()
	}
	for range peers {
		if i := <-answered; errs[i] == nil {
			sorted := slices.Sorted(maps.Keys(firing[i]))
			out.Firing, out.Count = sorted[:min(len(sorted), 5)], len(sorted)
			return out
		}
	}
	out.Err = errors.Join(errs...)
	return out
}

// firingAt asks one peer, streaming at most holdPeerBytes (an answer cut after matches holds).
func (h *AlertHold) firingAt(ctx context.Context, p *Poster, hdr http.Header) (map[string]bool, error) {
	found, left := map[string]bool{}, int64(holdPeerBytes)
	for _, set := range h.Sets {
		q := url.Values{"active": {"true"}, "silenced": {"false"}, "inhibited": {"false"}}
		for _, m := range set {
			q.Add("filter", m.String())
		}
		cut := false
		err := p.exchange(ctx, http.MethodGet, p.url+"?"+q.Encode(), nil, hdr, func(r io.Reader) error {
			read, err := matchStream(httpbound.Limit(io.NopCloser(r), left), set, found)
			left, cut = left-read, errors.Is(err, httpbound.ErrTooLarge)
			return err
		})
		if cut && len(found) > 0 {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// matchStream decodes a list of alerts one at a time into found (as Read filters), returning the bytes read.
func matchStream(r io.Reader, set amlabels.Matchers, found map[string]bool) (int64, error) {
	dec := json.NewDecoder(r)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return dec.InputOffset(), fmt.Errorf("answer is not a list of alerts (%v)", err)
	}
	for dec.More() {
		var al struct {
			Labels map[string]string `json:"labels"`
		}
		if err := dec.Decode(&al); err != nil {
			return dec.InputOffset(), err
		}
		// A missing label is "", as Alertmanager reads it.
		matches := !slices.ContainsFunc(set, func(m *amlabels.Matcher) bool { return !m.Matches(al.Labels[m.Name]) })
		name := al.Labels["alertname"]
		own := name != "" && (slices.Contains(ChartWedgeRules, name) ||
			slices.ContainsFunc(alert.Events, func(s alert.EventSpec) bool { return s.Alertname == name }))
		if matches && !own {
			found[describe(al.Labels)] = true
		}
	}
	_, err := dec.Token()
	return dec.InputOffset(), err
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
