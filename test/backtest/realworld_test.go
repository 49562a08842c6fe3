package backtest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"

	"github.com/agentenv/watchdog/internal/promtest"
	"github.com/agentenv/watchdog/pkg/backtest"
)

// Histories as production Prometheus setups record them, each once misread by
// the replay: a pod scraped by two jobs or relabeled mid-range, series of one
// pod that disagree, a rescheduled standby beside an HA leader's wedge, restarts
// made outside the watchdog, kube-state-metrics labels the default query does
// not match, a jittery or interrupted kube-state-metrics, another pod label, and
// a schedule read in the laptop's zone.

// outsideAt is when a person (or the stop-gap) deleted a wedged pod.
func outsideAt() time.Time { return base.Add(time.Hour + 10*time.Minute) }

func realWorldSituations() []situation {
	three := func(time.Time) int { return 3 }
	old := startedAt(base.Add(-3 * time.Hour))
	end := base.Add(3 * time.Hour)
	w := base.Add(time.Hour + 2*time.Minute + 10*time.Second) // discovery dies; ready 0 from 40 s later
	dead := zeroIn([2]time.Time{w.Add(40 * time.Second), base.Add(4 * time.Hour)})
	one, zero := constant(1), constant(0)
	lw := base.Add(12*time.Minute + 10*time.Second) // the HA leader's wedge
	ha := base.Add(2*time.Hour + 2*time.Minute + 10*time.Second)
	out := outsideAt()
	wedged := func(ns string, ksm time.Duration) situation {
		return situation{ns: ns, from: base, to: end, scrape: 15 * time.Second, serving: three, ksm: ksm,
			pods: []schedPod{{name: sched + "k1s2m", ip: "10.0.2.20", from: base, to: end, start: old, ready: dead, rejected: rejections(w, end)}}}
	}
	swapped, exported := wedged("bt-ksmswap", 0), wedged("bt-ksmexported", 0)
	swapped.ksmSwapped, exported.ksmExported = true, true
	// kube-state-metrics scraped every 60.004 s: a median spacing in fractions of a second.
	jitter := wedged("bt-jitter", time.Minute+4*time.Millisecond)
	// kube-state-metrics not scraped for 4 minutes (less than Prometheus' default
	// lookback of 5), around the CronJob run of +1h05m; the scheduler healthy.
	ksmGap := situation{ns: "bt-ksmgap", from: base, to: end, scrape: 15 * time.Second, serving: three,
		ksmDown: span(base.Add(time.Hour+3*time.Minute+10*time.Second), base.Add(time.Hour+7*time.Minute+10*time.Second)),
		pods:    []schedPod{{name: sched + "k3g4p", ip: "10.0.2.21", from: base, to: end, start: old, ready: constant(3), rejected: absent}}}
	return []situation{{
		// One pod scraped twice: by its PodMonitor's job and, 5 s later, by an
		// annotation-based kubernetes-pods job. Discovery dies at +1h02m.
		ns: "bt-twice", from: base, to: end, scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "t1w2c", ip: "10.0.2.1", from: base, to: end, start: old, ready: dead, rejected: rejections(w, end), twin: 5 * time.Second}},
	}, {
		// The same wedge; a relabeling adds a label to the pod's series at
		// +1h05m15s, while the run of +1h05m confirms.
		ns: "bt-relabel", from: base, to: end, scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "r3l4b", ip: "10.0.2.2", from: base, to: end, start: old, ready: dead, rejected: rejections(w, end),
			relabeled: base.Add(time.Hour + 5*time.Minute + 15*time.Second)}},
	}, {
		// Two jobs scrape one pod and disagree for 30 minutes from +1h: one reads 3
		// ready nodes, the other 0 (e.g. it scrapes another process's page).
		ns: "bt-disagree", from: base, to: end, scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "d1s2g", ip: "10.0.2.3", from: base, to: end, start: old, ready: constant(3), rejected: absent,
			twin: 5 * time.Second, twinReady: zeroIn([2]time.Time{base.Add(time.Hour), base.Add(time.Hour + 30*time.Minute)})}},
	}, {
		// An HA scheduler: the leader's discovery dies at +12m and a person deletes
		// it at +2h (a new leader starts); a standby was rescheduled at +5m.
		ns: "bt-harescheduled", from: base, to: end, scrape: 15 * time.Second, serving: three,
		pods: []schedPod{
			{name: sched + "l5e6a", ip: "10.0.2.10", from: base, to: base.Add(2 * time.Hour), start: old, podReady: one,
				ready: zeroIn([2]time.Time{lw.Add(40 * time.Second), end}), rejected: rejections(lw, end)},
			{name: sched + "s5t6b", ip: "10.0.2.11", from: base, to: end, start: old, podReady: zero, ready: zero, rejected: absent},
			{name: sched + "s7t8b", ip: "10.0.2.12", from: base, to: base.Add(5 * time.Minute), start: old, podReady: zero, ready: zero, rejected: absent},
			{name: sched + "s9t0b", ip: "10.0.2.13", from: base.Add(5 * time.Minute), to: end, start: startedAt(base.Add(5 * time.Minute)), podReady: zero, ready: zero, rejected: absent},
			{name: sched + "n1l2d", ip: "10.0.2.14", from: base.Add(2 * time.Hour), to: end, start: startedAt(base.Add(2 * time.Hour)), podReady: one,
				ready: between(base.Add(2*time.Hour), base.Add(2*time.Hour+45*time.Second), 0, 3), rejected: absent},
		},
	}, {
		// The stop-gap ran in production: a weak wedge from +1h02m, and the pod
		// deleted at +1h10m (its second run reading 0); the new pod is healthy.
		ns: "bt-outside", from: base, to: end, scrape: 15 * time.Second, serving: three,
		pods: []schedPod{
			{name: sched + "o3u4t", ip: "10.0.2.4", from: base, to: out, start: old, ready: zeroIn([2]time.Time{base.Add(time.Hour + 2*time.Minute), end}), rejected: absent},
			{name: sched + "n5e6w", ip: "10.0.2.5", from: out, to: end, start: startedAt(out), ready: between(out, out.Add(45*time.Second), 0, 3), rejected: absent},
		},
	}, swapped, exported, jitter, ksmGap, {
		// An HA scheduler whose series name the pod in kubernetes_pod_name (the
		// classic kubernetes-pods relabeling); kube-state-metrics names it pod.
		ns: "bt-podlabel", from: base, to: end, scrape: 15 * time.Second, serving: three,
		pods: []schedPod{
			{name: sched + "p1l2b", ip: "10.0.2.30", from: base, to: end, start: old, podReady: one, podLabel: "kubernetes_pod_name",
				ready: zeroIn([2]time.Time{ha.Add(40 * time.Second), end}), rejected: rejections(ha, end)},
			{name: sched + "p3s4b", ip: "10.0.2.31", from: base, to: end, start: old, podReady: zero, podLabel: "kubernetes_pod_name", ready: zero, rejected: absent},
			{name: sched + "p5s6b", ip: "10.0.2.32", from: base, to: end, start: old, podReady: zero, podLabel: "kubernetes_pod_name", ready: zero, rejected: absent},
		},
	}}
}

// oneStrongRestart: the dead discovery of +1h02m restarted once, as a live run
// restarts it: seen by the run of +1h05m, strong at once, confirmed over 90 s;
// nothing blocked, no restart-blocked page, no advice about --leader-lease.
func oneStrongRestart(t *testing.T, res *backtest.Result, pod string) {
	t.Helper()
	if len(res.Restarts) != 1 || res.Restarts[0].Pod != pod || res.Restarts[0].Evidence != "strong" || len(res.Blocked) != 0 {
		t.Fatalf("restarts %+v, blocked %+v: want %s restarted once on strong evidence, nothing blocked", res.Restarts, res.Blocked, pod)
	}
	if want := base.Add(time.Hour + 6*time.Minute + 30*time.Second); !res.Restarts[0].At.Equal(want) {
		t.Errorf("restart at %s, want %s", res.Restarts[0].At, want)
	}
	if got, want := events(res), []string{"wedged/critical", "restarted/warning", "recovered/info"}; !slices.Equal(got, want) {
		t.Errorf("alerts = %v, want %v", got, want)
	}
	if slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "--leader-lease") }) {
		t.Errorf("warnings %q: advice about --leader-lease for one pod", res.Warnings)
	}
	if len(res.Pods) != 1 {
		t.Errorf("pods %q, want one", res.Pods)
	}
}

// TestBacktestPodScrapedTwice: a PodMonitor and an annotation-based job scrape the
// same pod. A live run lists one pod and restarts it once; so does the replay.
func TestBacktestPodScrapedTwice(t *testing.T) {
	oneStrongRestart(t, replay(t, "bt-twice", base, base.Add(3*time.Hour)), sched+"t1w2c")
}

// TestBacktestRelabeledMidRange: a label added to the pod's series while a run
// confirms the wedge is still one pod.
func TestBacktestRelabeledMidRange(t *testing.T) {
	oneStrongRestart(t, replay(t, "bt-relabel", base, base.Add(3*time.Hour)), sched+"r3l4b")
}

// TestBacktestSeriesDisagree: two jobs of one pod disagree for 30 minutes. The
// replay cannot know which a live run would have read: unknown, never bad; no
// restart, no page, no wedge, and the report says where they disagreed.
func TestBacktestSeriesDisagree(t *testing.T) {
	res := replay(t, "bt-disagree", base, base.Add(3*time.Hour))
	if len(res.Restarts) != 0 || len(res.Blocked) != 0 || res.Summary.Pages != 0 || res.AsRecorded.Wedged != 0 {
		t.Errorf("restarts %+v, blocked %+v, pages %d, wedged %s as recorded: want none", res.Restarts, res.Blocked, res.Summary.Pages, res.AsRecorded.Wedged.D())
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, sched+"d1s2g") && strings.Contains(w, "disagree") && strings.Contains(w, "kubernetes-pods")
	}) {
		t.Errorf("warnings %q, want the disagreement named with its jobs", res.Warnings)
	}
}

// TestBacktestRescheduledStandby: a standby rescheduled at +5m is no
// replacement of the HA leader, whose wedge from +12m is restarted once. As
// recorded, the wedge lasted until a person deleted the leader at +2h:
// restarted outside the watchdog, not healed by itself.
func TestBacktestRescheduledStandby(t *testing.T) {
	res := replay(t, "bt-harescheduled", base, base.Add(3*time.Hour), "--leader-lease", "agentenv-scheduler")
	if len(res.Restarts) != 1 || res.Restarts[0].Pod != sched+"l5e6a" || len(res.Blocked) != 0 {
		t.Fatalf("restarts %+v, blocked %+v: want the leader restarted once", res.Restarts, res.Blocked)
	}
	if want := base.Add(16*time.Minute + 30*time.Second); !res.Restarts[0].At.Equal(want) {
		t.Errorf("restart at %s, want %s", res.Restarts[0].At, want)
	}
	if w := res.AsRecorded.Wedges; len(w) != 1 || w[0].HealedBy != "restarted outside the watchdog" || w[0].Duration.D() < 107*time.Minute {
		t.Errorf("as recorded: wedges %+v, want the leader's wedge of +12m..+2h, restarted outside the watchdog", w)
	}
}

// TestBacktestRestartsOutsideTheWatchdog: the stop-gap deleted the wedged pod in
// production. Every column says so; none calls the wedge healed by itself.
func TestBacktestRestartsOutsideTheWatchdog(t *testing.T) {
	res := replay(t, "bt-outside", base, base.Add(3*time.Hour), "--max-restarts", "0")
	for name, s := range map[string]backtest.WorldSummary{"as recorded": res.AsRecorded, "watchdog (--max-restarts 0)": res.Summary.WorldSummary} {
		if len(s.Wedges) != 1 || s.Wedges[0].HealedBy != "restarted outside the watchdog" {
			t.Errorf("%s: wedges %+v, want one, restarted outside the watchdog", name, s.Wedges)
		}
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "restarted outside the watchdog") && strings.Contains(w, sched+"o3u4t")
	}) {
		t.Errorf("warnings %q, want the recorded restart named", res.Warnings)
	}
	if len(res.Restarts) != 0 || len(res.Blocked) == 0 {
		t.Errorf("restarts %+v, blocked %d: want the due restart refused by the budget", res.Restarts, len(res.Blocked))
	}
	// The 39-hour wedge ended when a person deleted the pod.
	wedge := replay(t, "bt-wedge", base, base.Add(41*time.Hour))
	if w := wedge.AsRecorded.Wedges; len(w) != 1 || w[0].HealedBy != "restarted outside the watchdog" {
		t.Errorf("bt-wedge as recorded: %+v, want the 39-hour wedge restarted outside the watchdog", w)
	}
}

// TestBacktestServingCountZeroThroughout: kube-state-metrics releases that
// swapped the serving and terminating labels make the default count read 0 all
// along, hiding the wedge as no-nodes. The report names the query and the
// variant to try; with docs/backtest.md's variant the wedge is restarted.
func TestBacktestServingCountZeroThroughout(t *testing.T) {
	res := replay(t, "bt-ksmswap", base, base.Add(3*time.Hour))
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "read 0 over the whole range") && strings.Contains(w, "kube_endpointslice_endpoints") && strings.Contains(w, `ready="true"`)
	}) {
		t.Errorf("warnings %q, want the zero count named with the label variants", res.Warnings)
	}
	count := strings.ReplaceAll(mustHave(t).count, "agentenv-system", "bt-ksmswap")
	variant := replay(t, "bt-ksmswap", base, base.Add(3*time.Hour), "--expected-query", strings.ReplaceAll(count, `serving="true",terminating="false"`, `ready="true"`))
	oneStrongRestart(t, variant, sched+"k1s2m")
}

// TestBacktestServingCountExportedLabels: kube-state-metrics scraped without
// honorLabels: its namespace is exported_namespace, the default query finds
// nothing, and the report names that variant; with it the wedge is restarted.
func TestBacktestServingCountExportedLabels(t *testing.T) {
	res := replay(t, "bt-ksmexported", base, base.Add(3*time.Hour))
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "--expected-query") && strings.Contains(w, "exported_namespace")
	}) {
		t.Errorf("warnings %q, want exported_namespace named", res.Warnings)
	}
	// docs/backtest.md: replace namespace by exported_namespace in the query and in --expected-series.
	exported := func(q string) string {
		return strings.ReplaceAll(strings.ReplaceAll(q, "agentenv-system", "bt-ksmexported"), "namespace", "exported_namespace")
	}
	variant := replay(t, "bt-ksmexported", base, base.Add(3*time.Hour), "--expected-query", exported(mustHave(t).count),
		"--expected-series", exported(backtest.DefaultQueries("agentenv-system", "agentenv-scheduler", "agentenv-nodes", 8000).ExpectedSeries))
	oneStrongRestart(t, variant, sched+"k1s2m")
}

// TestBacktestJitteryServingCount: kube-state-metrics scraped every 60.004 s.
// The lookback of two intervals is sent in whole seconds, which every
// Prometheus reads (2.43+ refuses a fractional one).
func TestBacktestJitteryServingCount(t *testing.T) {
	oneStrongRestart(t, replay(t, "bt-jitter", base, base.Add(3*time.Hour)), sched+"k1s2m")
}

// TestBacktestPodLabelOfTheScheduler: the scheduler's series name the pod in
// kubernetes_pod_name; kube-state-metrics' readiness names it pod. The HA
// leader is told, and its wedge restarted once.
func TestBacktestPodLabelOfTheScheduler(t *testing.T) {
	res := replay(t, "bt-podlabel", base, base.Add(3*time.Hour), "--leader-lease", "agentenv-scheduler", "--pod-label", "kubernetes_pod_name",
		"--start-time-series", `process_start_time_seconds{namespace="bt-podlabel"}`)
	if len(res.Restarts) != 1 || res.Restarts[0].Pod != sched+"p1l2b" || len(res.Blocked) != 0 {
		t.Errorf("restarts %+v, blocked %+v: want the leader restarted once", res.Restarts, res.Blocked)
	}
}

// TestBacktestScheduleInUTC: a relative --start and an hourly schedule at :30,
// on a laptop 5h30m east of UTC: the runs are at :30 UTC, as the CronJob
// controller (UTC unless its timeZone says otherwise) runs them.
func TestBacktestScheduleInUTC(t *testing.T) {
	local := time.Local
	time.Local = time.FixedZone("IST", 5*3600+1800)
	defer func() { time.Local = local }()
	ago := func(at time.Time) string { return fmt.Sprintf("%ds", int(time.Since(at).Seconds())) }
	out := runCLI(t, "backtest", "--prometheus-url", prom.URL, "-n", "bt-weak", "--start", ago(base), "--end", ago(base.Add(3*time.Hour)),
		"--schedule", "30 * * * *", "-o", "json")
	res := decode(t, out)
	// The weak wedge from +1h02m, first seen by the run of +1h30m, restarted after --wedged-for.
	if len(res.Restarts) != 1 || !res.Restarts[0].At.Equal(base.Add(time.Hour+32*time.Minute+30*time.Second)) {
		t.Errorf("restarts %+v, want one at %s", res.Restarts, base.Add(time.Hour+32*time.Minute+30*time.Second))
	}
}

// TestBacktestHAWithoutLeaderLease: three replicas, exactly one ready at a
// time, replayed without --leader-lease: the replay blocks and pages as a live
// run would, the header says it looks like an HA scheduler and what
// --leader-lease would change, and as recorded the standbys are not wedged.
func TestBacktestHAWithoutLeaderLease(t *testing.T) {
	res := replay(t, "bt-ha", base, base.Add(3*time.Hour))
	if len(res.Restarts) != 0 || len(res.Blocked) == 0 || !slices.Contains(events(res), "restart-blocked/critical") {
		t.Errorf("restarts %+v, blocked %d, alerts %v: want the live run's refusals", res.Restarts, len(res.Blocked), events(res))
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "looks like an HA scheduler") && strings.Contains(w, "single-target") && strings.Contains(w, "with --leader-lease")
	}) {
		t.Errorf("warnings %q, want the HA header", res.Warnings)
	}
	// The leader's wedge, from +2h02m50s to the end; standbys read 0 by design.
	within(t, "as recorded: wedged", res.AsRecorded.Wedged.D(), 56*time.Minute, 58*time.Minute)
	// A wedged canary judged beside a healthy scheduler (--judge-pods selector) is
	// another Deployment's pod, no standby: wedged as recorded, no HA header.
	sel := replay(t, "bt-canary", base, base.Add(3*time.Hour), "--judge-pods", "selector")
	if slices.ContainsFunc(sel.Warnings, func(w string) bool { return strings.Contains(w, "looks like an HA scheduler") }) || sel.AsRecorded.Wedged.D() < 2*time.Hour {
		t.Errorf("canary under --judge-pods selector: warnings %q, wedged %s as recorded: want no HA header and the canary's 2h", sel.Warnings, sel.AsRecorded.Wedged.D())
	}
}

func decode(t *testing.T, out string) *backtest.Result {
	t.Helper()
	var res backtest.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decode the JSON report: %v\n%s", err, out)
	}
	return &res
}

// TestBacktestUnknownTime: time the data cannot tell is its own entry, never
// wedged time, and the header gives its share of the range. A 5-minute gap inside
// a 39-minute wedge is unknown, not wedged; a replay without a serving count is
// unknown throughout, not "wedged 0s"; a 4-minute gap in kube-state-metrics alone
// is unknown on every Prometheus: on 2.42, which ignores the lookback parameter
// and would bridge it, the report says so and drops the bridged steps.
func TestBacktestUnknownTime(t *testing.T) {
	gap := replay(t, "bt-gapwedge", base, base.Add(3*time.Hour), "--max-restarts", "0")
	within(t, "gap inside a wedge: wedged", gap.AsRecorded.Wedged.D(), 33*time.Minute+30*time.Second, 35*time.Minute)
	within(t, "gap inside a wedge: unknown", gap.AsRecorded.Unknown.D(), 4*time.Minute, 5*time.Minute)

	args := []string{"backtest", "--prometheus-url", prom.URL, "-n", "bt-wedge", "--start", base.Format(time.RFC3339), "--end", base.Add(3 * time.Hour).Format(time.RFC3339),
		"--expected-query", `count(kube_endpointslice_endpoints{namespace="no-such-namespace"})`}
	blind := decode(t, runCLI(t, append(args, "-o", "json")...))
	if blind.AsRecorded.Wedged != 0 || blind.AsRecorded.Unknown.D() < 3*time.Hour {
		t.Errorf("without a serving count: wedged %s, unknown %s as recorded, want unknown throughout", blind.AsRecorded.Wedged.D(), blind.AsRecorded.Unknown.D())
	}
	if text := runCLI(t, args...); !strings.Contains(text, "100% of the range") || !strings.Contains(text, "time unknown") {
		t.Errorf("the text report does not give the unknown share:\n%s", text)
	}

	ksm := replay(t, "bt-ksmgap", base, base.Add(3*time.Hour))
	within(t, "kube-state-metrics gap: unknown", ksm.AsRecorded.Unknown.D(), 150*time.Second, 210*time.Second)
	client, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	info, err := promv1.NewAPI(client).Buildinfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	said := slices.ContainsFunc(ksm.Warnings, func(w string) bool { return strings.Contains(w, "ignores the query parameter lookback_delta") })
	if old := strings.HasPrefix(info.Version, "2.42."); said != old {
		t.Errorf("Prometheus %s: the report says it ignores lookback_delta: %v, want %v (warnings %q)", info.Version, said, old, ksm.Warnings)
	}
}

// docs is docs/backtest.md's "What your Prometheus must have": its scrape config,
// the queries to paste, and the last of them, the default serving count.
type docs struct {
	scrapeConfig string
	queries      []string
	count        string
}

func mustHave(t *testing.T) docs {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "docs", "backtest.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "## What your Prometheus must have")
	section, _, _ = strings.Cut(section, "\n## ")
	var d docs
	for _, block := range regexp.MustCompile("(?s)```(yaml|promql)\n(.*?)```").FindAllStringSubmatch(section, -1) {
		if block[1] == "yaml" {
			d.scrapeConfig = block[2]
		} else {
			d.queries = append(d.queries, block[2])
		}
	}
	if d.scrapeConfig == "" || len(d.queries) < 4 {
		t.Fatalf("docs/backtest.md \"What your Prometheus must have\": scrape config %q, %d queries", d.scrapeConfig, len(d.queries))
	}
	d.count = d.queries[len(d.queries)-1]
	return d
}

// TestBacktestWhatPrometheusMustHave: docs/backtest.md's scrape config makes a
// scheduler pod the target the replay reads; its queries, pasted into this Prometheus
// over a healthy scheduler's history (its namespace for agentenv-system), answer
// as the page says: one series per pod, the endpoints serving and not
// terminating, the count of the serving nodes; and that count is the one the
// backtest reads by default.
func TestBacktestWhatPrometheusMustHave(t *testing.T) {
	d := mustHave(t)
	scrapesThePod(t, d.scrapeConfig)
	client, err := api.NewClient(api.Config{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`{namespace="bt-weak", pod="` + sched + `w1e2k"} => 1`, `{namespace="bt-weak", pod="` + sched + `w1e2k"} => 1`,
		`{ready="true", serving="true", terminating="false"} => 3`, `{} => 3`}
	for i, q := range d.queries {
		v, _, _, err := promv1.NewAPI(client).Query(context.Background(), strings.ReplaceAll(q, "agentenv-system", "bt-weak"), base.Add(30*time.Minute))
		if err != nil {
			t.Errorf("query %d of the page: %v\n%s", i+1, err, q)
			continue
		}
		if got := regexp.MustCompile(` @\[[0-9.]+\]`).ReplaceAllString(v.String(), ""); i < len(want) && got != want[i] {
			t.Errorf("query %d of the page answers %q, want %q\n%s", i+1, got, want[i], q)
		}
	}
	strip := func(s string) string { return strings.Join(strings.Fields(s), "") }
	if def := backtest.DefaultQueries("agentenv-system", "agentenv-scheduler", "agentenv-nodes", 8000).Expected; strip(def) != strip(d.count) {
		t.Errorf("the page's serving count\n%s\nis not the default --expected-query\n%s", d.count, def)
	}
}

// scrapesThePod checks the page's scrape config on this Prometheus. Its builds here
// (Debian's, and the module's with remove_all_sd) have no Kubernetes discovery, so
// a static target carrying the meta labels discovery gives a scheduler pod (port
// 9090 declared) stands in for it: promtool accepts the config, and the server's
// target, after the page's relabeling, is the pod's port 9101 with the namespace
// and pod labels the replay reads. The scrape interval is long: the target is
// looked at, not scraped.
func scrapesThePod(t *testing.T, config string) {
	t.Helper()
	sd := regexp.MustCompile(`(?s)kubernetes_sd_configs:.*?\n(\s+)relabel_configs:`)
	if !sd.MatchString(config) {
		t.Fatalf("no kubernetes_sd_configs before relabel_configs in the page's scrape config:\n%s", config)
	}
	config = sd.ReplaceAllString(config, `static_configs: [{targets: ['127.0.0.1:9090'], labels: {__meta_kubernetes_namespace: agentenv-system, `+
		`__meta_kubernetes_pod_name: agentenv-scheduler-5d8f7-a1b2c, __meta_kubernetes_pod_container_name: scheduler}}]`+"\n${1}relabel_configs:")
	config = strings.Replace(config, "scrape_interval: 15s", "scrape_interval: 1h", 1)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "check.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", filepath.Join(dir, "check.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s\n%s", err, out, config)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	srv, err := promtest.StartWithConfig(ctx, prometheus, config, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Stop() }()
	client, err := api.NewClient(api.Config{Address: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for ctx.Err() == nil {
		targets, err := promv1.NewAPI(client).Targets(ctx)
		if err == nil && len(targets.Active) > 0 {
			a := targets.Active[0]
			got = fmt.Sprintf("%s %s/%s %s", a.ScrapeURL, a.Labels["namespace"], a.Labels["pod"], a.Labels["job"])
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if want := "http://127.0.0.1:9101/metrics agentenv-system/agentenv-scheduler-5d8f7-a1b2c agentenv-scheduler"; got != want {
		t.Errorf("the page's scrape config makes the target %q, want %q", got, want)
	}
}
