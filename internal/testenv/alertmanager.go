package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// EnvAlertmanager names the Alertmanager binary the tests start (the Makefile sets
// it from hack/alertmanager.sh).
const EnvAlertmanager = "WATCHDOG_ALERTMANAGER"

// Alertmanager is a real Alertmanager on 127.0.0.1, without gossip, with a
// throwaway storage directory.
type Alertmanager struct {
	*Process
	// Base is the URL up to the route prefix: what --alertmanager-url takes.
	Base string
}

// StartAlertmanager runs bin with config (alertmanager.yml's text) under
// routePrefix ("" for none), keeping its files in dir.
func StartAlertmanager(bin, config, routePrefix, dir string) (*Alertmanager, error) {
	cfg := filepath.Join(dir, "alertmanager.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return nil, err
	}
	attempt := 0
	p, err := StartProcess(bin, func(addr string) []string {
		attempt++
		return []string{
			"--config.file=" + cfg,
			"--storage.path=" + filepath.Join(dir, fmt.Sprintf("data-%d", attempt)),
			"--web.listen-address=" + addr,
			"--web.route-prefix=" + routePrefix,
			"--cluster.listen-address=", // no gossip: no port beyond the API
			"--log.level=warn",
		}
	}, routePrefix+"/-/ready")
	if err != nil {
		return nil, fmt.Errorf("alertmanager: %w", err)
	}
	return &Alertmanager{Process: p, Base: p.URL + routePrefix}, nil
}

// GettableAlert is the part of Alertmanager's GET /api/v2/alerts the tests read.
type GettableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Status       struct {
		State       string   `json:"state"`
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// Alerts lists the alerts Alertmanager holds as not yet resolved whose labels match
// filter (a matcher such as namespace="x"; "" for all).
func (p *Alertmanager) Alerts(ctx context.Context, filter string) ([]GettableAlert, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("filter", filter)
	}
	resp, err := get(ctx, p.Base+"/api/v2/alerts?"+q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []GettableAlert
	return out, json.NewDecoder(resp.Body).Decode(&out)
}
