package backtest

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/backtest"
	"github.com/agentenv/watchdog/pkg/cli"
)

const sched = "agentenv-scheduler-5d8f7-"

// The moments of each situation, from base.
func wedgeAt() time.Time   { return base.Add(time.Hour + 2*time.Minute + 10*time.Second) }
func flapAt() time.Time    { return base.Add(time.Hour + 4*time.Minute + 20*time.Second) }
func kubeletAt() time.Time { return base.Add(time.Hour + 4*time.Minute + 30*time.Second) }

func situations() []situation {
	three := func(time.Time) int { return 3 }
	w := wedgeAt()
	healed := w.Add(39 * time.Hour) // a person deleted the wedged pod 39 hours in
	f := flapAt()
	k := kubeletAt()
	return []situation{{
		// Discovery died and never came back: ready 0 and rejected heartbeats rising
		// for 39 hours, until someone deleted the pod.
		ns: "bt-wedge", from: base, to: base.Add(41 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{
			{name: sched + "a1b2c", ip: "10.0.0.5", from: base, to: healed, start: startedAt(base.Add(-3 * time.Hour)),
				ready: between(w.Add(40*time.Second), healed, 0, 3), rejected: rejections(w, healed)},
			{name: sched + "d3e4f", ip: "10.0.0.6", from: healed, to: base.Add(41 * time.Hour), start: startedAt(healed),
				ready: between(healed, healed.Add(45*time.Second), 0, 3), rejected: absent},
		},
	}, {
		// An API-server flap that heals itself: ready 0 for 45 s, rejections for 80 s,
		// with a CronJob run landing inside it.
		ns: "bt-flap", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "f1a2b", ip: "10.0.0.7", from: base, to: base.Add(3 * time.Hour), start: startedAt(base.Add(-3 * time.Hour)),
			ready: between(f.Add(20*time.Second), f.Add(65*time.Second), 0, 3), rejected: rejections(f, f.Add(80*time.Second))}},
	}, {
		// Every node gone for two hours: 0 ready is the truth.
		ns: "bt-nonodes", from: base, to: base.Add(4 * time.Hour), scrape: 15 * time.Second,
		serving: func(t time.Time) int {
			if !t.Before(base.Add(time.Hour)) && t.Before(base.Add(3*time.Hour)) {
				return 0
			}
			return 3
		},
		pods: []schedPod{{name: sched + "n0n0d", ip: "10.0.0.8", from: base, to: base.Add(4 * time.Hour), start: startedAt(base.Add(-3 * time.Hour)),
			ready: between(base.Add(time.Hour+40*time.Second), base.Add(3*time.Hour+30*time.Second), 0, 3), rejected: absent}},
	}, {
		// Prometheus recorded nothing for 26 minutes while the scheduler was fine.
		ns: "bt-gap", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		down: [][2]time.Time{{base.Add(time.Hour + 2*time.Minute), base.Add(time.Hour + 28*time.Minute)}},
		pods: []schedPod{{name: sched + "g4p5q", ip: "10.0.0.9", from: base, to: base.Add(3 * time.Hour), start: startedAt(base.Add(-3 * time.Hour)),
			ready: constant(3), rejected: absent}},
	}, {
		// The kubelet restarted the scheduler container: a new process (counters
		// reset from 40 to absent), ready 0 for a minute while it starts.
		ns: "bt-kubelet", from: base, to: base.Add(3 * time.Hour), scrape: 15 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "k7l8m", ip: "10.0.0.10", from: base, to: base.Add(3 * time.Hour),
			start: func(t time.Time) time.Time {
				if t.Before(k) {
					return base.Add(-3 * time.Hour)
				}
				return k
			},
			ready: between(k, k.Add(time.Minute), 0, 3),
			rejected: func(t time.Time) (float64, bool) {
				if t.Before(k) {
					return 40, true
				}
				return 0, false
			}}},
	}, {
		// A stale cache for two hours: one node was replaced and discovery never
		// learnt it (ready 2 of 3, its heartbeats rejected once a minute). Scraped
		// every 30 s, coarser than the default --sample-interval.
		ns: "bt-stale", from: base, to: base.Add(4 * time.Hour), scrape: 30 * time.Second, serving: three,
		pods: []schedPod{{name: sched + "s9t8u", ip: "10.0.0.11", from: base, to: base.Add(4 * time.Hour), start: startedAt(base.Add(-3 * time.Hour)),
			ready: between(base.Add(time.Hour), base.Add(3*time.Hour), 2, 3),
			rejected: func(t time.Time) (float64, bool) {
				switch {
				case t.Before(base.Add(time.Hour)):
					return 0, false
				case t.Before(base.Add(3 * time.Hour)):
					return float64(1 + t.Sub(base.Add(time.Hour))/time.Minute), true
				}
				return 121, true
			}}},
	}}
}

// backtestRun runs `watchdog backtest` in-process over one situation's namespace.
func backtestRun(t *testing.T, ns string, from, to time.Time, extra ...string) *backtest.Result {
	t.Helper()
	out := runCLI(t, append([]string{"backtest", "--prometheus-url", prom.URL, "-n", ns,
		"--start", from.Format(time.RFC3339), "--end", to.Format(time.RFC3339), "-o", "json"}, extra...)...)
	var res backtest.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("decode the JSON report: %v\n%s", err, out)
	}
	return &res
}

func runCLI(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if code := cli.ExecuteContext(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("watchdog %s: exit %d\n%s\nprometheus log:\n%s", strings.Join(args, " "), code, stderr.String(), prom.Logs())
	}
	return stdout.String()
}

func events(res *backtest.Result) []string {
	var out []string
	for _, p := range res.Pages {
		ev := p.Event + "/" + p.Severity
		if p.Reminder {
			ev += "/reminder"
		}
		out = append(out, ev)
	}
	return out
}

func within(t *testing.T, what string, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %s, want within [%s, %s]", what, got, lo, hi)
	}
}

// TestBacktestDeadDiscovery39h: the incident itself. The watchdog restarts once,
// on strong evidence, 90 s (the confirm window) after the first run that saw it;
// the stop-gap restarts once, at its second run reading 0; left alone the scheduler
// stayed wedged 39 hours.
func TestBacktestDeadDiscovery39h(t *testing.T) {
	res := backtestRun(t, "bt-wedge", base, base.Add(41*time.Hour))
	if len(res.Restarts) != 1 {
		t.Fatalf("restarts = %+v, want exactly one", res.Restarts)
	}
	r := res.Restarts[0]
	if r.Pod != sched+"a1b2c" || r.Evidence != "strong" {
		t.Errorf("restart = %+v, want pod %sa1b2c on strong evidence", r, sched)
	}
	// The run at +1h05m is the first to see ready 0 (from +1h02m50s); strong at
	// once (the counter rose since the run before), confirmed over 90 s.
	firstRun := base.Add(time.Hour + 5*time.Minute)
	if !r.At.Equal(firstRun.Add(90 * time.Second)) {
		t.Errorf("restart at %s, want %s (first wedged run + the 90 s confirm window)", r.At, firstRun.Add(90*time.Second))
	}
	if r.AfterEpisodeStart.D() != 90*time.Second {
		t.Errorf("restart %s after the episode started, want 1m30s", r.AfterEpisodeStart.D())
	}
	if got, want := events(res), []string{"wedged/critical", "restarted/warning", "recovered/info"}; !slices.Equal(got, want) {
		t.Errorf("alerts = %v, want %v", got, want)
	}
	if res.Summary.Pages != 1 || res.Summary.Restarts != 1 || len(res.Blocked) != 0 {
		t.Errorf("summary = %+v, blocked %v: want 1 page, 1 restart, nothing blocked", res.Summary, res.Blocked)
	}
	if len(res.Episodes) != 1 || res.Episodes[0].Kind != "wedged" || res.Episodes[0].Evidence != "strong" || res.Episodes[0].Outcome != "restarted" {
		t.Errorf("episodes = %+v, want one strong wedge, restarted", res.Episodes)
	}
	// The world as each would have left it: wedged from the first zero reading
	// (+1h03m00s) until the restart.
	within(t, "watchdog: time wedged", res.Summary.Wedged.D(), 3*time.Minute, 4*time.Minute)
	if len(res.Summary.Wedges) != 1 || res.Summary.Wedges[0].HealedBy != "restart" {
		t.Errorf("watchdog wedges = %+v, want one, healed by the restart", res.Summary.Wedges)
	}

	if len(res.StopGap.Restarts) != 1 {
		t.Fatalf("stop-gap restarts = %+v, want one", res.StopGap.Restarts)
	}
	sg := res.StopGap.Restarts[0]
	if want := base.Add(time.Hour + 10*time.Minute); !sg.At.Equal(want) || !sg.ZeroSince.Equal(want.Add(-5*time.Minute)) {
		t.Errorf("stop-gap restart = %+v, want at %s (ready 0 at its runs of %s and then)", sg, want, want.Add(-5*time.Minute))
	}
	within(t, "stop-gap: time wedged", res.StopGap.Summary.Wedged.D(), 7*time.Minute, 8*time.Minute)
	within(t, "as recorded: time wedged", res.AsRecorded.Wedged.D(), 39*time.Hour-2*time.Minute, 39*time.Hour)
	if res.AsRecorded.WorstWedge.D() < 38*time.Hour {
		t.Errorf("as recorded: worst time to heal %s, want the 39 h wedge", res.AsRecorded.WorstWedge.D())
	}
}

// TestBacktestRunMode: `watchdog run` every 30 s sees the same wedge sooner and
// restarts it sooner than the CronJob.
func TestBacktestRunMode(t *testing.T) {
	res := backtestRun(t, "bt-wedge", base, base.Add(2*time.Hour), "--interval", "30s")
	if len(res.Restarts) != 1 {
		t.Fatalf("restarts = %+v, want one", res.Restarts)
	}
	// First pass to read 0: +1h03m00s; strong at once; 90 s later.
	if want := base.Add(time.Hour + 4*time.Minute + 30*time.Second); !res.Restarts[0].At.Equal(want) {
		t.Errorf("restart at %s, want %s", res.Restarts[0].At, want)
	}
	if !strings.Contains(res.Mode, "--interval 30s") || res.Runs < 200 {
		t.Errorf("mode %q with %d runs, want run mode every 30 s over 2 h", res.Mode, res.Runs)
	}
}

// TestBacktestSelfHealingFlap: a run lands in a 45 s flap with rising rejections
// (strong evidence); its confirmation samples see ready come back: no restart, no
// page. The stop-gap reads 0 once and also does nothing.
func TestBacktestSelfHealingFlap(t *testing.T) {
	res := backtestRun(t, "bt-flap", base, base.Add(3*time.Hour))
	if len(res.Restarts) != 0 || len(res.Pages) != 0 || len(res.Blocked) != 0 {
		t.Errorf("restarts %+v, alerts %v, blocked %+v: want none", res.Restarts, events(res), res.Blocked)
	}
	if len(res.Episodes) != 1 {
		t.Fatalf("episodes = %+v, want the flap", res.Episodes)
	}
	e := res.Episodes[0]
	if e.Kind != "wedged" || e.Evidence != "strong" || e.Outcome != "recovered" || !e.From.Equal(base.Add(time.Hour+5*time.Minute)) {
		t.Errorf("episode = %+v, want a strong wedge seen at +1h05m that recovered", e)
	}
	within(t, "flap episode", e.Duration.D(), 15*time.Second, 30*time.Second)
	if len(res.StopGap.Restarts) != 0 {
		t.Errorf("stop-gap restarts = %+v, want none", res.StopGap.Restarts)
	}
}

// TestBacktestNoNodes: two hours without a serving node. The watchdog judges
// no-nodes and does nothing; the stop-gap, with no other check, restarts the
// scheduler every ten minutes.
func TestBacktestNoNodes(t *testing.T) {
	res := backtestRun(t, "bt-nonodes", base, base.Add(4*time.Hour))
	if len(res.Restarts) != 0 || len(res.Pages) != 0 {
		t.Errorf("restarts %+v, alerts %v: want none", res.Restarts, events(res))
	}
	if n := len(res.StopGap.Restarts); n < 10 || n > 12 {
		t.Errorf("stop-gap restarts = %d, want 10-12 (every 10 min for 2 h)", n)
	}
	for _, r := range res.StopGap.Restarts {
		if r.At.Before(base.Add(time.Hour)) || !r.At.Before(base.Add(3*time.Hour)) {
			t.Errorf("stop-gap restart at %s, outside the no-nodes window", r.At)
		}
	}
}

// TestBacktestScrapeGap: 26 minutes without data are unknown, never bad: the
// watchdog says it is blind (a warning after 3 unknown runs) and restarts nothing.
func TestBacktestScrapeGap(t *testing.T) {
	res := backtestRun(t, "bt-gap", base, base.Add(3*time.Hour))
	if len(res.Restarts) != 0 || len(res.Episodes) != 0 || res.Summary.Pages != 0 {
		t.Errorf("restarts %+v, episodes %+v, pages %d: want none", res.Restarts, res.Episodes, res.Summary.Pages)
	}
	if len(res.StopGap.Restarts) != 0 {
		t.Errorf("stop-gap restarts = %+v, want none", res.StopGap.Restarts)
	}
	if got, want := events(res), []string{"blind/warning", "recovered/info"}; !slices.Equal(got, want) {
		t.Fatalf("alerts = %v, want %v", got, want)
	}
	if blind := res.Pages[0].Run; !blind.Equal(base.Add(time.Hour + 15*time.Minute)) {
		t.Errorf("blind from the run of %s, want the third run in the gap (+1h15m)", blind)
	}
}

// TestBacktestKubeletRestart: a container restart is a new process (its counters
// reset): starting, not a wedge, for both.
func TestBacktestKubeletRestart(t *testing.T) {
	res := backtestRun(t, "bt-kubelet", base, base.Add(3*time.Hour))
	if len(res.Restarts) != 0 || len(res.Pages) != 0 || len(res.Episodes) != 0 {
		t.Errorf("restarts %+v, alerts %v, episodes %+v: want none", res.Restarts, events(res), res.Episodes)
	}
	if len(res.StopGap.Restarts) != 0 {
		t.Errorf("stop-gap restarts = %+v, want none", res.StopGap.Restarts)
	}
}

// TestBacktestStaleCache: ready 2 of 3 with rejections for two hours is degraded:
// alerted (a warning, reminded hourly), not restarted by default; invisible to
// the stop-gap. The data was scraped every 30 s: the backtest warns.
func TestBacktestStaleCache(t *testing.T) {
	res := backtestRun(t, "bt-stale", base, base.Add(4*time.Hour))
	if len(res.Restarts) != 0 || res.Summary.Pages != 0 {
		t.Errorf("restarts %+v, pages %d: want none", res.Restarts, res.Summary.Pages)
	}
	if got, want := events(res), []string{"degraded/warning", "degraded/warning/reminder", "recovered/info"}; !slices.Equal(got, want) {
		t.Errorf("alerts = %v, want %v", got, want)
	}
	if len(res.Episodes) != 1 || res.Episodes[0].Kind != "degraded" || res.Episodes[0].Outcome != "recovered" {
		t.Errorf("episodes = %+v, want one degraded episode, recovered", res.Episodes)
	}
	if len(res.StopGap.Restarts) != 0 || res.AsRecorded.Wedged != 0 {
		t.Errorf("stop-gap restarts %+v, wedged as recorded %s: want none", res.StopGap.Restarts, res.AsRecorded.Wedged.D())
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "ready gauge was recorded every 30s, coarser than --sample-interval 15s")
	}) {
		t.Errorf("warnings = %q, want the coarse scrape interval named", res.Warnings)
	}
}

// TestBacktestTextAndJSONShape: the text report names each part, and the JSON has
// the documented keys.
func TestBacktestTextAndJSONShape(t *testing.T) {
	// Every situation's text report, in the test log (go test -v) for people.
	for _, s := range situations() {
		args := []string{"backtest", "--prometheus-url", prom.URL, "-n", s.ns,
			"--start", s.from.Format(time.RFC3339), "--end", s.to.Format(time.RFC3339)}
		text := runCLI(t, args...)
		t.Logf("watchdog %s\n%s", strings.Join(args[3:], " "), text)
		for _, want := range []string{"EPISODES (", "RESTARTS the watchdog would have made (", "STOP-GAP restarts", "SUMMARY", "worst time to heal"} {
			if !strings.Contains(text, want) {
				t.Errorf("%s: text report lacks %q", s.ns, want)
			}
		}
	}
	args := []string{"backtest", "--prometheus-url", prom.URL, "-n", "bt-wedge",
		"--start", base.Format(time.RFC3339), "--end", base.Add(41 * time.Hour).Format(time.RFC3339)}
	if text := runCLI(t, args...); !strings.Contains(text, "EPISODES (1)") || !strings.Contains(text, "RESTARTS the watchdog would have made (1)") {
		t.Errorf("the 39-hour wedge's text report:\n%s", text)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(runCLI(t, append(args, "-o", "json")...)), &doc); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"restarts", "pages", "episodes", "summary", "stopGap", "blocked"} {
		if _, ok := doc[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	r := doc["restarts"].([]any)[0].(map[string]any)
	for _, key := range []string{"pod", "at", "evidence", "afterEpisodeStart"} {
		if _, ok := r[key]; !ok {
			t.Errorf("restart lacks %q: %v", key, r)
		}
	}
}

// TestBacktestWithoutServingCount: a Prometheus without kube-state-metrics'
// EndpointSlice series has no serving-node count. Every run is unknown (blind,
// never a restart), and the report says why at the top instead of leaving the
// reader to guess from a column of blind runs.
func TestBacktestWithoutServingCount(t *testing.T) {
	res := backtestRun(t, "bt-wedge", base, base.Add(3*time.Hour),
		"--expected-query", `count(kube_endpointslice_endpoints{namespace="no-such-namespace"})`)
	if len(res.Restarts) != 0 || len(res.Episodes) != 0 {
		t.Errorf("restarts %+v, episodes %+v: want none without a serving count", res.Restarts, res.Episodes)
	}
	if got := events(res); len(got) == 0 || got[0] != "blind/warning" {
		t.Errorf("alerts = %v, want blind first", got)
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "--expected-query") && strings.Contains(w, "no samples") && strings.Contains(w, "endpointslices")
	}) {
		t.Errorf("warnings = %q, want the empty --expected-query named, with kube-state-metrics' --resources", res.Warnings)
	}
	// The series the serving count's resolution is read from: empty for the same
	// reason, and said the same way.
	res = backtestRun(t, "bt-wedge", base, base.Add(3*time.Hour),
		"--expected-series", `kube_endpointslice_info{namespace="no-such-namespace"}`)
	if !slices.ContainsFunc(res.Warnings, func(w string) bool {
		return strings.Contains(w, "--expected-series") && strings.Contains(w, "--resources=<the list it has>,endpointslices")
	}) {
		t.Errorf("warnings = %q, want the empty --expected-series named, with kube-state-metrics' --resources", res.Warnings)
	}
}

// TestBacktestBlockedRestart: with --max-restarts 0 (alert only) the 39-hour wedge
// is due and refused: the report lists the blocked restart with the gate that
// refused it, the watchdog restarts nothing and stays wedged as recorded, and the
// stop-gap, which has no budget, still restarts once.
func TestBacktestBlockedRestart(t *testing.T) {
	res := backtestRun(t, "bt-wedge", base, base.Add(3*time.Hour), "--max-restarts", "0")
	if len(res.Restarts) != 0 {
		t.Errorf("restarts = %+v, want none with --max-restarts 0", res.Restarts)
	}
	if len(res.Blocked) == 0 {
		t.Fatalf("blocked = none, want the due restart refused")
	}
	b := res.Blocked[0]
	if b.Pod != sched+"a1b2c" || !b.Run.Equal(base.Add(time.Hour+5*time.Minute)) || len(b.Gates) == 0 || b.Gates[0].Name != "budget" {
		t.Errorf("first blocked restart = %+v, want pod %sa1b2c in the run of +1h05m, refused by the budget gate", b, sched)
	}
	if res.Summary.Blocked != len(res.Blocked) || !slices.Contains(events(res), "restart-blocked/critical") {
		t.Errorf("summary %+v, alerts %v: want the blocked restarts counted and alerted", res.Summary, events(res))
	}
	if len(res.StopGap.Restarts) != 1 || res.Summary.Wedged <= res.StopGap.Summary.Wedged {
		t.Errorf("stop-gap restarts %+v; wedged %s (watchdog) vs %s (stop-gap): the watchdog that may not restart stays wedged longer",
			res.StopGap.Restarts, res.Summary.Wedged.D(), res.StopGap.Summary.Wedged.D())
	}
	var text strings.Builder
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "BLOCKED restarts ("+strconv.Itoa(len(res.Blocked))+")") || !strings.Contains(text.String(), "budget") {
		t.Errorf("text report without the blocked restarts and their gate:\n%s", text.String())
	}
}
