package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/agentenv/watchdog/internal/testenv"
)

func startPushgateway(t *testing.T) *testenv.Pushgateway {
	t.Helper()
	bin := toolBinary(t, testenv.EnvPushgateway, "pushgateway.sh")
	pg, err := testenv.StartPushgateway(bin)
	must(t, err)
	t.Cleanup(pg.Stop)
	return pg
}

// pushed is the Pushgateway's exposition, read back as Prometheus scrapes it.
type pushed map[string]*dto.MetricFamily

func scrapePushgateway(t *testing.T, pg *testenv.Pushgateway) pushed {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := pg.Metrics(ctx)
	must(t, err)
	return m
}

// value is the sample of family whose labels include want; ok is false when there
// is none.
func (p pushed) value(family string, want map[string]string) (float64, bool) {
	f := p[family]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		case m.GetUntyped() != nil:
			return m.GetUntyped().GetValue(), true
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestPushgatewayCronJobMode: each `watchdog check --pushgateway-url` pushes the
// families `watchdog run` serves to a real Pushgateway, under the group the flags
// name, every counter present from the first run; the next run replaces the
// previous run's series (a verdict that changed leaves no stale series); a failed
// run keeps the last successful pass time of the run before; a dry run pushes
// nothing; a Pushgateway that is down costs a warning, not the run.
func TestPushgatewayCronJobMode(t *testing.T) {
	pg := startPushgateway(t)
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	// --wedged-for 1h: the wedge below stays a wedge the runs wait on.
	flags := []string{"--pushgateway-url", pg.URL, "--pushgateway-job", "wd-test", "--pushgateway-grouping", "namespace=" + s.ns, "--wedged-for", "1h"}
	group := map[string]string{"job": "wd-test", "namespace": s.ns}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range group {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	expect := func(t *testing.T, p pushed, family string, labels map[string]string, want float64) {
		t.Helper()
		if got, ok := p.value(family, with(labels)); !ok || got != want {
			t.Errorf("%s%v = %v (present %v), want %v", family, labels, got, ok, want)
		}
	}

	first := s.check(flags...)
	first.expect(t, 0, "healthy", "none")
	p := scrapePushgateway(t, pg)
	expect(t, p, "agentenv_watchdog_build_info", nil, 1)
	expect(t, p, "agentenv_watchdog_passes_total", map[string]string{"result": "ok"}, 1)
	for _, zero := range []struct {
		family string
		labels map[string]string
	}{
		{"agentenv_watchdog_passes_total", map[string]string{"result": "error"}},
		{"agentenv_watchdog_restarts_total", map[string]string{"outcome": "done"}},
		{"agentenv_watchdog_restarts_total", map[string]string{"outcome": "failed"}},
		{"agentenv_watchdog_scrape_errors_total", map[string]string{"kind": "timeout"}},
		{"agentenv_watchdog_alerts_total", map[string]string{"event": "wedged", "sink": "kubernetes-event", "result": "ok"}},
		{"agentenv_watchdog_alerts_total", map[string]string{"event": "restart-ineffective", "sink": "kubernetes-event", "result": "failed"}},
	} {
		expect(t, p, zero.family, zero.labels, 0)
	}
	expect(t, p, "agentenv_watchdog_pod_verdict", map[string]string{"pod": s.pod.Name, "verdict": "healthy"}, 1)
	expect(t, p, "agentenv_watchdog_pod_ready_nodes", map[string]string{"pod": s.pod.Name}, 3)
	expect(t, p, "agentenv_watchdog_last_pass_verdict", map[string]string{"verdict": "healthy"}, 1)
	expect(t, p, "agentenv_watchdog_last_pass_action", map[string]string{"action": "none"}, 1)
	expect(t, p, "agentenv_watchdog_pass_duration_seconds", nil, 1)
	success, ok := p.value("agentenv_watchdog_last_successful_pass_timestamp_seconds", group)
	if !ok || time.Since(time.Unix(int64(success), 0)) > time.Minute {
		t.Errorf("last successful pass %v (present %v), want about now", success, ok)
	}
	if _, ok := p["agentenv_watchdog_leader"]; ok {
		t.Error("a one-shot run pushed the leader gauge")
	}
	pushedAt, ok := p.value("push_time_seconds", group)
	if !ok {
		t.Fatalf("the Pushgateway has no group %v: %v", group, p)
	}

	// The next run replaces the group's series: the wedge is the only verdict.
	s.metrics.SetPage(fixture(t, "scheduler-metrics-discovery-dead.txt"))
	second := s.check(flags...)
	second.expect(t, 0, "wedged", "wait")
	p = scrapePushgateway(t, pg)
	expect(t, p, "agentenv_watchdog_pod_verdict", map[string]string{"pod": s.pod.Name, "verdict": "wedged"}, 1)
	if v, ok := p.value("agentenv_watchdog_pod_verdict", with(map[string]string{"verdict": "healthy"})); ok {
		t.Errorf("the first run's healthy verdict is still pushed (%v)", v)
	}
	expect(t, p, "agentenv_watchdog_last_pass_verdict", map[string]string{"verdict": "wedged"}, 1)
	expect(t, p, "agentenv_watchdog_last_pass_action", map[string]string{"action": "wait"}, 1)
	expect(t, p, "agentenv_watchdog_alerts_total", map[string]string{"event": "wedged", "sink": "kubernetes-event", "result": "ok"}, 1)
	expect(t, p, "agentenv_watchdog_passes_total", map[string]string{"result": "ok"}, 2) // a total over the runs
	success2, _ := p.value("agentenv_watchdog_last_successful_pass_timestamp_seconds", group)
	if success2 <= success {
		t.Errorf("last successful pass %v after a second successful run, was %v", success2, success)
	}

	// A failed run (the nodes Service is misnamed: exit 1) counts the error and
	// keeps the last successful pass time of the run before.
	failed := s.check(append(flags, "--nodes-service", "no-such-service")...)
	if failed.code != 1 {
		t.Fatalf("a misnamed nodes Service: exit %d, want 1\n%s", failed.code, failed.stderr)
	}
	p = scrapePushgateway(t, pg)
	expect(t, p, "agentenv_watchdog_passes_total", map[string]string{"result": "error"}, 1)
	expect(t, p, "agentenv_watchdog_passes_total", map[string]string{"result": "ok"}, 2)
	if got, _ := p.value("agentenv_watchdog_last_successful_pass_timestamp_seconds", group); got != success2 {
		t.Errorf("a failed run changed the last successful pass time: %v, want %v", got, success2)
	}
	if last, _ := p.value("agentenv_watchdog_last_pass_timestamp_seconds", group); last <= success2 {
		t.Errorf("last pass %v, want after the last success %v", last, success2)
	}

	// A dry run leaves no trace.
	before, _ := scrapePushgateway(t, pg).value("push_time_seconds", group)
	if before <= pushedAt {
		t.Fatalf("push time did not move: %v then %v", pushedAt, before)
	}
	s.check(append(flags, "--dry-run")...).expect(t, 0, "wedged", "wait")
	if after, _ := scrapePushgateway(t, pg).value("push_time_seconds", group); after != before {
		t.Errorf("a dry run pushed (push time %v, was %v)", after, before)
	}

	// The Pushgateway down: the run does its job and says the push failed.
	pg.Stop()
	down := s.check(flags...)
	down.expect(t, 0, "wedged", "wait")
	if !strings.Contains(strings.Join(down.report.Warnings, "\n"), "metrics not pushed") || !strings.Contains(down.stderr, "metrics push failed") {
		t.Errorf("no warning about the failed push: warnings %v\n%s", down.report.Warnings, down.stderr)
	}
}
