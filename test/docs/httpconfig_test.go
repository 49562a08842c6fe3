package docs

import (
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/config"
)

// TestBacktestHTTPConfigExampleLoads: docs/backtest.md's --prometheus-http-config
// example is a file prometheus/common (and so the backtest) reads, with basic auth
// and the Mimir tenant's header.
func TestBacktestHTTPConfigExampleLoads(t *testing.T) {
	doc := read(t, "docs/backtest.md")
	m := regexp.MustCompile("(?s)--prometheus-http-config FILE`.*?```yaml\n(.*?)```").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("docs/backtest.md has no yaml example after --prometheus-http-config FILE")
	}
	cfg, err := config.LoadHTTPConfig(strings.ReplaceAll("\n"+m[1], "\n  ", "\n")) // the block is indented in a list
	if err != nil {
		t.Fatalf("the example does not load: %v\n%s", err, m[1])
	}
	if cfg.BasicAuth == nil || cfg.HTTPHeaders == nil || len(cfg.HTTPHeaders.Headers["X-Scope-OrgID"].Values) != 1 {
		t.Errorf("the example lacks basic auth or the tenant header: %+v", cfg)
	}
}
