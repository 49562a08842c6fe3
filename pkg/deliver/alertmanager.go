package deliver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/state"
)

// AlertmanagerAPIPath is appended to each --alertmanager-url.
const AlertmanagerAPIPath = "/api/v2/alerts"

// DefaultAlertmanagerTTL is how long an alert stays active in Alertmanager when it
// is not posted again: three CronJob intervals, so that one or two failed runs do
// not resolve a problem that is still there.
const DefaultAlertmanagerTTL = 15 * time.Minute

// PostableAlert is one element of the body of Alertmanager's POST /api/v2/alerts
// (its OpenAPI postableAlert).
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// Alertmanager posts every notification as alerts to Alertmanager's v2 API, on each
// URL of an HA group (Alertmanager peers do not share alerts, only silences and
// the notification log, so each must receive them). A delivery succeeds when at
// least one peer accepts it: that peer routes and notifies; a peer that missed an
// ongoing alert gets it with the next run's refresh.
//
// Alertmanager resolves an alert whose endsAt has passed, so ongoing alerts are
// posted with endsAt = now + TTL and posted again by Refresh on every run while
// they are open; recovered posts endsAt = now for every alert it closes.
type Alertmanager struct {
	// Posters holds one poster per URL, each built for <url>/api/v2/alerts.
	Posters []*Poster
	// Username and Password (basic auth) or BearerToken authenticate requests.
	Username, Password, BearerToken string
	TTL                             time.Duration
	RunbookURL, GeneratorURL        string
	// Cluster, Namespace and Labels (--alert-labels) label refreshed alerts
	// (notifications carry their own).
	Cluster, Namespace string
	Labels             map[string]string
	// Warn is told about a peer that failed while another accepted the alerts (the
	// delivery counts as done). Never nil after NewAlertmanager.
	Warn func(err error)
}

// NewAlertmanager builds the sink for urls (already validated). Each poster is
// named "alertmanager", or "alertmanager[i]" (1-based, in flag order) when there
// are several, so that errors say which peer failed without naming its URL.
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
			u.Path = strings.TrimSuffix(u.Path, "/") + AlertmanagerAPIPath
			u.RawPath = ""
		}
		am.Posters = append(am.Posters, NewPoster(name, u.String(), attemptTimeout, attempts, budget))
	}
	return am, nil
}

func (a *Alertmanager) Name() string { return "alertmanager" }

// Reach checks the path to every peer: a run delivers while one accepts, but a
// preflight should show each one it cannot reach.
func (a *Alertmanager) Reach(ctx context.Context) error {
	var errs []error
	for _, p := range a.Posters {
		errs = append(errs, p.Reach(ctx))
	}
	return errors.Join(errs...)
}

// Send posts the alerts n stands for: the alert itself, or for recovered the
// resolution of every alert it closes. A test or dry-run notification is sent as
// any other (a dry run never reaches a sink).
func (a *Alertmanager) Send(ctx context.Context, n alert.Notification) error {
	if alert.Spec(n.Event).Kind != alert.Resolution && alert.AlertnameOf(n.Event) == "" {
		// Never report as delivered what Alertmanager was not told.
		return fmt.Errorf("alertmanager: event %q has no alertname: not sent", n.Event)
	}
	alerts := a.Alerts(n)
	if len(alerts) == 0 {
		return nil // a recovered that closes nothing this sink knows of
	}
	return a.post(ctx, alerts)
}

// Refresh posts every open ongoing alert again with endsAt = now + TTL, so that
// Alertmanager keeps it active while the problem lasts. One-shots are not
// refreshed: they end on their own.
func (a *Alertmanager) Refresh(ctx context.Context, open map[string]*state.Alert, now time.Time) (int, error) {
	var alerts []PostableAlert
	for _, ev := range slices.Sorted(maps.Keys(open)) {
		o, spec := open[ev], alert.Spec(ev)
		if o == nil || spec.Kind != alert.Ongoing || spec.Alertname == "" {
			continue
		}
		n := alert.Notification{Event: ev, Severity: spec.Severity, Cluster: a.Cluster, Namespace: a.Namespace, Labels: a.Labels,
			Pod: o.Pod, Reason: o.Reason, NextStep: spec.NextStep}
		alerts = append(alerts, a.alert(n, o.OpenedAt, now.Add(a.TTL)))
	}
	if len(alerts) == 0 {
		return 0, nil
	}
	return len(alerts), a.post(ctx, alerts)
}

// Alerts renders n as the postable alerts Send posts.
func (a *Alertmanager) Alerts(n alert.Notification) []PostableAlert {
	if alert.Spec(n.Event).Kind == alert.Resolution {
		var out []PostableAlert
		for _, c := range n.Closes {
			if alert.AlertnameOf(c.Event) == "" {
				continue
			}
			closed := alert.Notification{Event: c.Event, Severity: alert.Spec(c.Event).Severity, Cluster: n.Cluster, Namespace: n.Namespace, Labels: n.Labels,
				Pod: c.Pod, Reason: "resolved: " + n.Reason, NextStep: alert.Spec(alert.EventRecovered).NextStep}
			out = append(out, a.alert(closed, c.OpenedAt, n.Time))
		}
		return out
	}
	if alert.AlertnameOf(n.Event) == "" {
		return nil
	}
	// The end counts from the alert's own time, not from now: an alert retried
	// from the outbox long after it was planned must not fire for a full TTL
	// again (Refresh keeps what is still open active).
	return []PostableAlert{a.alert(n, n.Time, n.Time.Add(a.TTL))}
}

// alert builds one postable alert. Its labels identify it (Alertmanager
// fingerprints the label set), so they hold only what is stable while a problem
// lasts: no reason, time or reminder flag.
func (a *Alertmanager) alert(n alert.Notification, startsAt, endsAt time.Time) PostableAlert {
	labels := map[string]string{
		"alertname": alert.AlertnameOf(n.Event),
		"severity":  n.Severity,
		"event":     n.Event,
		"namespace": n.Namespace,
	}
	// The operator's labels never replace the watchdog's own (--alert-labels
	// refuses those names; a retried entry might still carry one).
	for k, v := range n.Labels {
		if _, own := labels[k]; !own {
			labels[k] = v
		}
	}
	if n.Cluster != "" {
		labels["cluster"] = n.Cluster
	}
	if n.Pod != "" {
		labels["pod"] = n.Pod
	}
	if n.Shadow {
		// A label, so that routes can send shadow mode's alerts elsewhere.
		labels["shadow"] = "true"
	}
	where := n.Namespace
	if n.Cluster != "" {
		where = n.Cluster + "/" + n.Namespace
	}
	summary := fmt.Sprintf("AgentENV scheduler %s in %s", n.Event, where)
	if n.Pod != "" {
		summary += " (pod " + n.Pod + ")"
	}
	if n.Test {
		summary = "Watchdog test alert (not a real incident) for " + where
	}
	if n.Shadow {
		summary = "[shadow] " + summary
	}
	if n.Paused != "" {
		// An annotation, not a label: a label would make the paused alert another
		// alert than the same problem's once the pause ends.
		summary = "[paused] " + summary
	}
	desc := n.Reason
	if n.NextStep != "" {
		desc += "\n\nNext step: " + n.NextStep
	}
	ann := map[string]string{"summary": summary, "description": state.Truncate(desc, 4000)}
	if a.RunbookURL != "" {
		ann["runbook_url"] = a.RunbookURL
	}
	if n.Paused != "" {
		ann["paused"] = state.Truncate(n.Paused, 1000)
	}
	// Alertmanager rejects an alert that ends before it starts.
	if !endsAt.After(startsAt) {
		endsAt = startsAt.Add(time.Second)
	}
	return PostableAlert{Labels: labels, Annotations: ann, StartsAt: startsAt.UTC(), EndsAt: endsAt.UTC(), GeneratorURL: a.GeneratorURL}
}

// headers are the request headers with the configured credentials, which every
// poster's errors then redact.
func (a *Alertmanager) headers() http.Header {
	h := http.Header{}
	switch {
	case a.BearerToken != "":
		h.Set("Authorization", "Bearer "+a.BearerToken)
	case a.Username != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(a.Username+":"+a.Password)))
	}
	for _, p := range a.Posters {
		// A receiver's error page may echo the request's headers.
		p.AddSecrets(h.Get("Authorization"), strings.TrimPrefix(h.Get("Authorization"), "Basic "), a.BearerToken, a.Password)
	}
	return h
}

// post sends alerts to every peer at once (a hung peer must not use up the time
// of the others) and succeeds when at least one accepted them.
func (a *Alertmanager) post(ctx context.Context, alerts []PostableAlert) error {
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
	switch {
	case len(failed) == 0:
		return nil
	case len(failed) < len(a.Posters):
		if a.Warn != nil {
			a.Warn(errors.New(strings.Join(failed, "; ")))
		}
		return nil
	}
	return errors.New(strings.Join(failed, "; "))
}
