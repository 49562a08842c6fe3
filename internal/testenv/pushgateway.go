package testenv

import (
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// EnvPushgateway names the Pushgateway binary the tests start (the Makefile sets it
// from hack/pushgateway.sh).
const EnvPushgateway = "WATCHDOG_PUSHGATEWAY"

// Pushgateway is a real Pushgateway on 127.0.0.1, keeping what it is sent in memory.
type Pushgateway struct{ *Process }

// StartPushgateway runs bin.
func StartPushgateway(bin string) (*Pushgateway, error) {
	p, err := StartProcess(bin, func(addr string) []string {
		return []string{"--web.listen-address=" + addr, "--log.level=warn"}
	}, "/-/ready")
	if err != nil {
		return nil, fmt.Errorf("pushgateway: %w", err)
	}
	return &Pushgateway{p}, nil
}

// Metrics is what Prometheus would scrape from it, by family name.
func (p *Pushgateway) Metrics(ctx context.Context) (map[string]*dto.MetricFamily, error) {
	resp, err := get(ctx, p.URL+"/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}
