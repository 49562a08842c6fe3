// Package backtest tests `watchdog backtest` against a real Prometheus HTTP API:
// synthetic history for six situations is written as OpenMetrics, imported with
// `promtool tsdb create-blocks-from openmetrics`, and served by the Prometheus server
// of hack/prometheus.sh (Debian's 2.42.0, or 3.16.0 built from its module).
package backtest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/promtest"
)

var (
	prom *promtest.Server
	// prometheus and promtool are the binaries prom runs.
	prometheus, promtool string
	// base is the start of every situation's history: old enough that the
	// 41-hour one ends in the past.
	base time.Time
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	server, tool, err := promtest.Binaries(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "backtest tests need prometheus and promtool:", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "watchdog-backtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	base = time.Now().UTC().Truncate(time.Hour).Add(-46 * time.Hour)
	om := &promtest.OpenMetrics{}
	for _, s := range slices.Concat(situations(), fidelitySituations(), realWorldSituations()) {
		s.write(om)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	prometheus, promtool = server, tool
	prom, err = promtest.Start(ctx, prometheus, promtool, om.Bytes(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "start prometheus on the synthetic history:", err)
		return 1
	}
	code := m.Run()
	if err := prom.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop prometheus:", err)
	}
	return code
}

// schedPod is one scheduler pod's recorded series, present in [from, to).
type schedPod struct {
	name     string
	ip       string
	from, to time.Time
	// start is the process start at t; ready and rejected its readings (ok false:
	// the counter series is absent, as before its first increment).
	start    func(t time.Time) time.Time
	ready    func(t time.Time) float64
	rejected func(t time.Time) (float64, bool)
	// gaps are spans in which this pod's series were not scraped (kube-state-
	// metrics' were).
	gaps [][2]time.Time
	// podReady is kube-state-metrics' kube_pod_status_ready{condition="true"} of
	// the pod (nil: not written); for an HA scheduler, readiness is leadership.
	podReady func(t time.Time) float64
	// twin > 0: a second job (kubernetes-pods, an annotation-based scrape) scrapes
	// the pod too, this much later; twinReady is what it reads (nil: ready).
	twin      time.Duration
	twinReady func(t time.Time) float64
	// relabeled: from then on the pod's series carry one more label (a relabeling
	// added to the scrape config).
	relabeled time.Time
	// podLabel names the label holding the pod's name on its own series ("": pod).
	podLabel string
}

// situation is one namespace's recorded history.
type situation struct {
	ns       string
	from, to time.Time
	scrape   time.Duration
	pods     []schedPod
	// serving is the number of serving node endpoints kube-state-metrics lists.
	serving func(t time.Time) int
	// down are spans in which Prometheus recorded nothing at all.
	down [][2]time.Time
	// ksm is kube-state-metrics' scrape interval (0: ksmScrape); ksmDown are spans
	// in which kube-state-metrics alone was not scraped.
	ksm     time.Duration
	ksmDown [][2]time.Time
	// ksmExported: kube-state-metrics scraped without honorLabels, so its
	// namespace label is the scrape's and the object's is exported_namespace.
	// ksmSwapped: the EndpointSlice labels of the kube-state-metrics releases that
	// wrote terminating's value into serving and the hostname into terminating.
	ksmExported, ksmSwapped bool
}

func (s situation) recorded(t time.Time) bool { return !inside(s.down, t) }

func inside(spans [][2]time.Time, t time.Time) bool {
	for _, d := range spans {
		if !t.Before(d[0]) && t.Before(d[1]) {
			return true
		}
	}
	return false
}

const ksmScrape = 30 * time.Second

func (s situation) ksmInterval() time.Duration {
	if s.ksm > 0 {
		return s.ksm
	}
	return ksmScrape
}

// write adds the situation's series as a real install would have them: the
// scheduler's own (scraped every s.scrape) and kube-state-metrics' EndpointSlice
// series for agentenv-nodes (every 30 s).
func (s situation) write(om *promtest.OpenMetrics) {
	for _, p := range s.pods {
		type scrape struct {
			job    string
			offset time.Duration
			ready  func(time.Time) float64
		}
		scrapes := []scrape{{"agentenv-scheduler", 0, p.ready}}
		if p.twin > 0 {
			twin := scrape{"kubernetes-pods", p.twin, p.twinReady}
			if twin.ready == nil {
				twin.ready = p.ready
			}
			scrapes = append(scrapes, twin)
		}
		for _, sc := range scrapes {
			for t := p.from.Add(sc.offset); t.Before(p.to) && !t.After(s.to); t = t.Add(s.scrape) {
				if !s.recorded(t) || inside(p.gaps, t) {
					continue
				}
				target := map[string]string{"namespace": s.ns, cmp.Or(p.podLabel, "pod"): p.name, "container": "scheduler", "job": sc.job, "instance": p.ip + ":9101"}
				if !p.relabeled.IsZero() && !t.Before(p.relabeled) {
					target["team"] = "agentenv"
				}
				om.Add("agentenv_scheduler_observed_nodes", "gauge", with(target, "status", "ready"), t, sc.ready(t))
				om.Add("process_start_time_seconds", "gauge", target, t, float64(p.start(t).Unix()))
				if v, ok := p.rejected(t); ok {
					om.Add("agentenv_scheduler_rpc_duration_seconds_count", "unknown", with(target, "rpc", "Heartbeat", "status", "invalid_argument"), t, v)
				}
			}
		}
	}
	slice := "agentenv-nodes-x7k2p"
	ksmTarget := map[string]string{"namespace": s.ns, "job": "kube-state-metrics", "instance": "10.9.0.2:8080"}
	if s.ksmExported {
		ksmTarget = map[string]string{"namespace": "monitoring", "exported_namespace": s.ns, "job": "kube-state-metrics", "instance": "10.9.0.2:8080"}
	}
	ksm := func(extra ...string) map[string]string {
		return with(ksmTarget, append([]string{"endpointslice", slice}, extra...)...)
	}
	for t := s.from; !t.After(s.to); t = t.Add(s.ksmInterval()) {
		if !s.recorded(t) || inside(s.ksmDown, t) {
			continue
		}
		for _, p := range s.pods {
			if p.podReady != nil && !t.Before(p.from) && t.Before(p.to) {
				om.Add("kube_pod_status_ready", "gauge", with(ksmTarget, "pod", p.name, "condition", "true", "uid", "uid-"+p.name), t, p.podReady(t))
			}
		}
		om.Add("kube_endpointslice_info", "gauge", ksm("addresstype", "IPv4"), t, 1)
		n := s.serving(t)
		if n == 0 {
			continue // an empty slice carries no port and no endpoint
		}
		om.Add("kube_endpointslice_ports", "gauge", ksm("port_name", "grpc", "port_protocol", "TCP", "port_number", "8000"), t, 1)
		for i := range n {
			name := "node-" + strconv.Itoa(i)
			serving, terminating, hostname := "true", "false", name
			if s.ksmSwapped {
				serving, terminating, hostname = "false", name, ""
			}
			om.Add("kube_endpointslice_endpoints", "gauge", ksm("address", "10.1.0."+strconv.Itoa(10+i), "ready", "true", "serving", serving, "terminating", terminating,
				"hostname", hostname, "targetref_kind", "Pod", "targetref_name", name, "targetref_namespace", s.ns), t, 1)
		}
	}
}

// with is labels and the extra name-value pairs, in a new map.
func with(labels map[string]string, extra ...string) map[string]string {
	l := maps.Clone(labels)
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// Helpers for the readings.
func constant(v float64) func(time.Time) float64 { return func(time.Time) float64 { return v } }
func startedAt(at time.Time) func(time.Time) time.Time {
	return func(time.Time) time.Time { return at }
}
func absent(time.Time) (float64, bool) { return 0, false }

// between is v inside [from, to) and other outside.
func between(from, to time.Time, v, other float64) func(time.Time) float64 {
	return func(t time.Time) float64 {
		if !t.Before(from) && t.Before(to) {
			return v
		}
		return other
	}
}

// rejections is the rejected-heartbeat counter of nodes that discovery lost at
// from: absent before, then 3 nodes retrying every 20 s for two minutes and once
// a minute after (the nodes back off), stopping at to.
func rejections(from, to time.Time) func(time.Time) (float64, bool) {
	return func(t time.Time) (float64, bool) {
		if t.Before(from) {
			return 0, false
		}
		if t.After(to) {
			t = to
		}
		d := t.Sub(from)
		fast := min(d, 2*time.Minute) / (20 * time.Second)
		slow := max(d-2*time.Minute, 0) / time.Minute
		return float64(3 * (fast + slow)), true
	}
}
