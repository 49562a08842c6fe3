package backtest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/decide"
)

// A narrow test of the replay's world without Prometheus (test/backtest runs the
// command against the real API): a history built in memory.

var t0 = time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)

// pod1 is named as the Deployment "sched" names its pods, so that the CLI's
// default --judge-pods deployment judges it.
const pod1 = "sched-5d8f7-a1b2c"

func series(from, to time.Time, step time.Duration, v func(time.Time) (float64, bool)) []model.SamplePair {
	var out []model.SamplePair
	for t := from; t.Before(to); t = t.Add(step) {
		if x, ok := v(t); ok {
			out = append(out, model.SamplePair{Timestamp: model.TimeFromUnixNano(t.UnixNano()), Value: model.SampleValue(x)})
		}
	}
	return out
}

// stream is a recorded series of pod in namespace ns.
func stream(pod string, values []model.SamplePair) *model.SampleStream {
	return &model.SampleStream{Metric: model.Metric{"pod": model.LabelValue(pod), "namespace": "ns"}, Values: values}
}

func always(v float64) func(time.Time) (float64, bool) {
	return func(time.Time) (float64, bool) { return v, true }
}

// history is one pod over [t0, t0+span) scraped every 15 s with 3 serving nodes.
func history(span time.Duration, ready func(time.Time) float64, rejected func(time.Time) (float64, bool)) *History {
	end := t0.Add(span)
	return &History{From: t0, To: end, Step: 15 * time.Second, ExpectedInterval: 15 * time.Second, Queries: Queries{PodLabel: "pod", KSMPodLabel: "pod"},
		Ready:     []*model.SampleStream{stream(pod1, series(t0, end, 15*time.Second, func(t time.Time) (float64, bool) { return ready(t), true }))},
		Rejected:  []*model.SampleStream{stream(pod1, series(t0, end, 15*time.Second, rejected))},
		StartTime: []*model.SampleStream{stream(pod1, series(t0, end, 15*time.Second, always(float64(t0.Add(-time.Hour).Unix()))))},
		Expected:  series(t0, end, 15*time.Second, always(3))}
}

// column builds h's World, as cfg judges it, with nobody's restarts.
func newColumn(t testing.TB, h *History, cfg Config) *column {
	t.Helper()
	w, err := build(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w.column()
}

func config() Config {
	every5, _ := cron.ParseStandard("*/5 * * * *")
	return Config{
		Check: check.Options{
			Decide: decide.Config{StartupGrace: 2 * time.Minute, WedgedFor: 150 * time.Second, ConfirmWindow: 90 * time.Second,
				MaxRestarts: 3, RestartWindow: time.Hour, RestartMethod: decide.MethodDelete, ClaimTimeout: 3 * time.Minute,
				Selection: decide.Selection{JudgePods: decide.JudgeDeployment, MaxPods: 10}},
			Alerts:         alert.PlanConfig{RealertInterval: time.Hour, BlindAfter: 3, WedgedFor: 150 * time.Second},
			Source:         alert.Source{Namespace: "ns"},
			SampleInterval: 15 * time.Second, StateConfigMap: "backtest",
		},
		Deployment: "sched", Timeout: 3 * time.Minute,
		Schedule: every5, ScheduleSpec: "*/5 * * * *", StopGap: every5, StopGapAfter: 5 * time.Minute, Log: zerolog.Nop(),
	}
}

// TestWeakWedgeRestartedOnceThenReplacementHealthy: ready 0 with no rejections
// from +12m: the watchdog restarts once after --wedged-for (weak evidence), the
// replacement reads healthy, nothing is restarted again; the stop-gap restarts
// once too, later.
func TestWeakWedgeRestartedOnceThenReplacementHealthy(t *testing.T) {
	wedge := t0.Add(12 * time.Minute)
	h := history(2*time.Hour, func(t time.Time) float64 {
		if t.Before(wedge) {
			return 3
		}
		return 0
	}, func(time.Time) (float64, bool) { return 0, false })
	res, err := Run(context.Background(), h, config())
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Restarts) != 1 || res.Restarts[0].Evidence != "weak" {
		t.Fatalf("restarts = %+v, want one on weak evidence", res.Restarts)
	}
	// Seen at +15m (the first run after the drop), which samples on until
	// --wedged-for (2m30s) of observations: it fits the run's deadline.
	if want := t0.Add(17*time.Minute + 30*time.Second); !res.Restarts[0].At.Equal(want) {
		t.Errorf("restart at %s, want %s", res.Restarts[0].At, want)
	}
	if len(res.StopGap.Restarts) != 1 || !res.StopGap.Restarts[0].At.Equal(t0.Add(20*time.Minute)) {
		t.Errorf("stop-gap restarts = %+v, want one at +20m", res.StopGap.Restarts)
	}
	if res.Summary.Wedged >= res.AsRecorded.Wedged || res.AsRecorded.Wedges[0].HealedBy != "still wedged at the end" {
		t.Errorf("wedged %s (watchdog) vs %s (as recorded: %+v)", res.Summary.Wedged.D(), res.AsRecorded.Wedged.D(), res.AsRecorded.Wedges)
	}
}

// TestReplacementsAreNamedApart: restarting a replacement makes a new one, and
// a world restart of a pod that is not listed does nothing.
func TestReplacementsAreNamedApart(t *testing.T) {
	h := history(time.Hour, func(time.Time) float64 { return 0 }, func(time.Time) (float64, bool) { return 0, false })
	w := newColumn(t, h, config())
	at := t0.Add(10 * time.Minute)
	if !w.Restart("ns/"+pod1, at) {
		t.Fatal("restart of the recorded pod refused")
	}
	pods := w.Pods(at.Add(time.Minute))
	if len(pods) != 1 || pods[0].Name != pod1+"~1" || pods[0].UID != "ns/"+pod1+"~1" || pods[0].ReadyNodes != 3 {
		t.Fatalf("pods after a restart = %+v, want the replacement ~1 reading 3", pods)
	}
	if w.Restart("ns/"+pod1, at.Add(2*time.Minute)) {
		t.Error("the restarted pod is gone; restarting it again must fail")
	}
	if !w.Restart("ns/"+pod1+"~1", at.Add(3*time.Minute)) {
		t.Fatal("restart of the replacement refused")
	}
	if pods := w.Pods(at.Add(4 * time.Minute)); len(pods) != 1 || pods[0].Name != pod1+"~2" {
		t.Errorf("pods = %+v, want ~2", pods)
	}
}

// TestStopGapPatience: --stop-gap-after is the stop-gap's patience, in its
// replay and in the report's words: ready 0 read at +15m restarts at +25m with
// 10m, and the text says 10m, not the default's 5 min.
func TestStopGapPatience(t *testing.T) {
	h := history(time.Hour, wedgedIn([2]time.Duration{12 * time.Minute, 3 * time.Hour}), noRejections)
	cfg := config()
	cfg.StopGapAfter = 10 * time.Minute
	res, err := Run(context.Background(), h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.StopGap.Restarts) == 0 || !res.StopGap.Restarts[0].At.Equal(t0.Add(25*time.Minute)) {
		t.Errorf("stop-gap restarts = %+v, want the first at +25m", res.StopGap.Restarts)
	}
	var text strings.Builder
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "ready 0 on runs 10m apart") || strings.Contains(text.String(), "5 min") {
		t.Errorf("the stop-gap's section does not name its 10m patience:\n%s", text.String())
	}
}

// wedgedIn reads 0 inside any of the spans and 3 outside.
func wedgedIn(spans ...[2]time.Duration) func(time.Time) float64 {
	return func(t time.Time) float64 {
		for _, s := range spans {
			if !t.Before(t0.Add(s[0])) && t.Before(t0.Add(s[1])) {
				return 0
			}
		}
		return 3
	}
}

func noRejections(time.Time) (float64, bool) { return 0, false }

// TestRepeatWedgeIsANewPod: the recorded pod wedges at +12m, heals by itself at
// +40m and wedges again at +60m. The watchdog restarts the first wedge; what the
// replay shows after the recorded heal is the replacement (live, the pod the
// restart made, with a new UID), so the second wedge is restarted too, not
// refused by the first restart's once-per-wedge record.
func TestRepeatWedgeIsANewPod(t *testing.T) {
	h := history(2*time.Hour, wedgedIn([2]time.Duration{12 * time.Minute, 40 * time.Minute}, [2]time.Duration{60 * time.Minute, 3 * time.Hour}), noRejections)
	res := replay(t, h, config())
	if len(res.Restarts) != 2 || len(res.Blocked) != 0 {
		t.Fatalf("restarts %+v, blocked %+v: want two restarts (one per wedge), none blocked", res.Restarts, res.Blocked)
	}
	if res.Restarts[0].UID == res.Restarts[1].UID {
		t.Errorf("both restarts of UID %s: the second wedge is on the first restart's replacement", res.Restarts[0].UID)
	}
	if slices.Contains(pageEvents(res), "restart-blocked/critical") {
		t.Errorf("alerts = %v, want no restart-blocked", pageEvents(res))
	}
	// The stop-gap restarts both wedges too; the watchdog, sooner.
	if len(res.StopGap.Restarts) != 2 || res.Summary.Wedged >= res.StopGap.Summary.Wedged {
		t.Errorf("stop-gap restarts %+v; wedged %s (watchdog) vs %s (stop-gap): want 2, and the watchdog shorter",
			res.StopGap.Restarts, res.Summary.Wedged.D(), res.StopGap.Summary.Wedged.D())
	}
	if n := len(res.Summary.Wedges); n != 2 || res.Summary.Wedges[0].HealedBy != "restart" || res.Summary.Wedges[1].HealedBy != "restart" {
		t.Errorf("watchdog wedges = %+v, want two, each healed by a restart", res.Summary.Wedges)
	}
	// Measured after the replay, each wedge lasts until its own restart (seen at
	// the run after it began, restarted 2m30s later), not until the record healed.
	if res.Summary.WorstWedge.D() > 6*time.Minute {
		t.Errorf("watchdog: worst time to heal %s, want at most 6m", res.Summary.WorstWedge.D())
	}
}

func pageEvents(res *Result) []string {
	var out []string
	for _, p := range res.Pages {
		out = append(out, p.Event+"/"+p.Severity)
	}
	return out
}

// replay runs the backtest and logs its figures (go test -v shows them).
func replay(t *testing.T, h *History, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("watchdog: %d restarts, %d blocked, %d pages, wedged %s in %d wedges (worst %s); stop-gap: %d restarts, wedged %s; as recorded: wedged %s in %d wedges (worst %s)",
		len(res.Restarts), len(res.Blocked), res.Summary.Pages, res.Summary.Wedged.D(), len(res.Summary.Wedges), res.Summary.WorstWedge.D(),
		len(res.StopGap.Restarts), res.StopGap.Summary.Wedged.D(), res.AsRecorded.Wedged.D(), len(res.AsRecorded.Wedges), res.AsRecorded.WorstWedge.D())
	return res
}

// without drops the target's samples (every series) inside [from, to): a scrape gap.
func without(h *History, from, to time.Duration) *History {
	keep := func(s []model.SamplePair) []model.SamplePair {
		return slices.DeleteFunc(slices.Clone(s), func(p model.SamplePair) bool {
			at := p.Timestamp.Time()
			return !at.Before(t0.Add(from)) && at.Before(t0.Add(to))
		})
	}
	for _, s := range slices.Concat(h.Ready, h.Rejected, h.Accepted, h.StartTime) {
		s.Values = keep(s.Values)
	}
	return h
}

// TestGapInsideAWedgeIsOneWedge: a 39-minute wedge with a 5-minute scrape gap
// in its middle is one wedge, with unknown time inside, not two healed "by
// itself": as recorded, one wedge of 39m; the stop-gap's and the watchdog's
// restarts heal it, each once.
func TestGapInsideAWedgeIsOneWedge(t *testing.T) {
	h := without(history(2*time.Hour, wedgedIn([2]time.Duration{12 * time.Minute, 51 * time.Minute}), noRejections), 30*time.Minute, 35*time.Minute)
	cfg := config()
	cfg.Check.Decide.MaxRestarts = 0 // alert only: the watchdog's world keeps the wedge as recorded
	res := replay(t, h, cfg)
	for name, s := range map[string]WorldSummary{"as recorded": res.AsRecorded, "watchdog (--max-restarts 0)": res.Summary.WorldSummary} {
		if len(s.Wedges) != 1 || s.Wedges[0].HealedBy != "itself" || s.WorstWedge.D() != 39*time.Minute {
			t.Errorf("%s: wedges %+v, worst %s: want one wedge of 39m, healed by itself", name, s.Wedges, s.WorstWedge.D())
			continue
		}
		if u := s.Wedges[0].Unknown.D(); u < 4*time.Minute || u > 5*time.Minute {
			t.Errorf("%s: unknown time inside the wedge %s, want the 5m gap", name, s.Wedges[0].Unknown.D())
		}
	}
	if len(res.StopGap.Restarts) != 1 || len(res.StopGap.Summary.Wedges) != 1 || res.StopGap.Summary.Wedges[0].HealedBy != "restart" {
		t.Errorf("stop-gap: restarts %+v, wedges %+v: want one restart healing the one wedge", res.StopGap.Restarts, res.StopGap.Summary.Wedges)
	}
}

// ha is three replicas of an HA scheduler over span: the leader (the first pod)
// reads leaderReady, the standbys read 0 by design; kube-state-metrics records
// each pod's readiness (readiness is leadership) every 30 s.
func ha(span time.Duration, leaderReady func(time.Time) float64) *History {
	h := history(span, leaderReady, noRejections)
	readiness := func(v float64) []model.SamplePair {
		return series(t0.Add(-10*time.Minute), t0.Add(span), 30*time.Second, always(v))
	}
	h.PodReady = []*model.SampleStream{stream(pod1, readiness(1))}
	for _, name := range []string{"sched-5d8f7-d3e4f", "sched-5d8f7-g5h6i"} {
		h.Ready = append(h.Ready, stream(name, series(t0, t0.Add(span), 15*time.Second, always(0))))
		h.StartTime = append(h.StartTime, stream(name, h.StartTime[0].Values))
		h.PodReady = append(h.PodReady, stream(name, readiness(0)))
	}
	h.Queries.PodReady = "readiness"
	return h
}

// TestHALeaderFromReadiness: with --leader-lease, the leader is the pod
// kube-state-metrics records ready (readiness is leadership); standbys read 0 by
// design and are not judged. A healthy hour is quiet; the leader's wedge in the
// second hour is restarted once.
func TestHALeaderFromReadiness(t *testing.T) {
	h := ha(2*time.Hour, wedgedIn([2]time.Duration{70 * time.Minute, 3 * time.Hour}))
	cfg := config()
	cfg.Check.Decide.LeaderLease = "sched"
	res := replay(t, h, cfg)
	if len(res.Blocked) != 0 || len(res.Restarts) != 1 || res.Restarts[0].Pod != pod1 {
		t.Errorf("restarts %+v, blocked %+v: want the leader's wedge restarted once, nothing blocked", res.Restarts, res.Blocked)
	}
	if got := pageEvents(res); !slices.Equal(got, []string{"wedged/critical", "restarted/warning", "recovered/info"}) {
		t.Errorf("alerts = %v, want only the leader's wedge", got)
	}
	if len(res.AsRecorded.Wedges) != 1 || !res.AsRecorded.Wedges[0].From.Equal(t0.Add(70*time.Minute)) {
		t.Errorf("as recorded: wedges %+v, want the leader's, from +1h10m (standbys are not wedged)", res.AsRecorded.Wedges)
	}
	if res.Summary.Wedged.D() > 6*time.Minute {
		t.Errorf("watchdog: wedged %s, want the leader's wedge until its restart", res.Summary.Wedged.D())
	}
}

// TestHALeaderUnknown: with --leader-lease and two pods recorded ready (or no
// readiness at some moment), the leader cannot be told: nobody is judged then
// (unknown), never a standby restarted on a guess.
func TestHALeaderUnknown(t *testing.T) {
	h := ha(time.Hour, wedgedIn([2]time.Duration{0, 3 * time.Hour}))
	h.PodReady[1].Values = h.PodReady[0].Values
	cfg := config()
	cfg.Check.Decide.LeaderLease = "sched"
	res := replay(t, h, cfg)
	if len(res.Restarts) != 0 || len(res.Blocked) != 0 || res.Summary.Wedged != 0 {
		t.Errorf("restarts %+v, blocked %+v, wedged %s: want none while the leader cannot be told", res.Restarts, res.Blocked, res.Summary.Wedged.D())
	}
}

// TestHAWithoutLeaderLeaseSaysSo: three replicas replayed without
// --leader-lease are judged as a live run would judge them, the report says
// why and what to pass, and no summary counts a standby as wedged.
func TestHAWithoutLeaderLeaseSaysSo(t *testing.T) {
	h := ha(time.Hour, func(time.Time) float64 { return 3 })
	h.Queries.PodReady = ""
	res := replay(t, h, config())
	if !containsWarning(res, "looks like an HA scheduler", "up to 3 scheduler pods reported at once", "with --leader-lease") || res.AsRecorded.Wedged != 0 {
		t.Errorf("warnings = %q, want several pods named with --leader-lease", res.Warnings)
	}
}

// TestRolloutOldPodIsTerminating: a rollout at +30m. The new pod starts (ready
// 0 while it starts), the old one drains (ready 0) and its series ends 4 minutes
// later. Live, the old pod is terminating and not judged: no episode of it, no
// blocked restart (two pods judged, single-target), no page; nor is its drain a
// wedge in the summary.
func TestRolloutOldPodIsTerminating(t *testing.T) {
	roll := t0.Add(30 * time.Minute)
	h := history(time.Hour, wedgedIn([2]time.Duration{30 * time.Minute, 3 * time.Hour}), noRejections)
	old := h.Ready[0]
	old.Values = slices.DeleteFunc(old.Values, func(p model.SamplePair) bool { return !p.Timestamp.Time().Before(roll.Add(4 * time.Minute)) })
	const fresh = "sched-6c9a1-z9y8x"
	h.Ready = append(h.Ready, stream(fresh, series(roll, t0.Add(time.Hour), 15*time.Second, func(t time.Time) (float64, bool) {
		if t.Before(roll.Add(45 * time.Second)) {
			return 0, true
		}
		return 3, true
	})))
	h.StartTime = append(h.StartTime, stream(fresh, series(roll, t0.Add(time.Hour), 15*time.Second, always(float64(roll.Unix())))))
	res := replay(t, h, config())
	if len(res.Blocked) != 0 || len(res.Restarts) != 0 || len(res.Pages) != 0 || len(res.Episodes) != 0 {
		t.Errorf("blocked %+v, restarts %+v, alerts %v, episodes %+v: want none during a rollout", res.Blocked, res.Restarts, pageEvents(res), res.Episodes)
	}
	if res.AsRecorded.Wedged != 0 || res.Summary.Wedged != 0 {
		t.Errorf("wedged %s as recorded, %s for the watchdog: a terminating pod's drain is no wedge", res.AsRecorded.Wedged.D(), res.Summary.Wedged.D())
	}
}

// TestReportHeaderSaysWhatIsAssumed: what history cannot show (rollout state,
// owner chains) is taken as passing, and the report says so at the top, before
// any section.
func TestReportHeaderSaysWhatIsAssumed(t *testing.T) {
	res := replay(t, history(time.Hour, func(time.Time) float64 { return 3 }, noRejections), config())
	var text strings.Builder
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	head, _, _ := strings.Cut(text.String(), "EPISODES")
	for _, want := range []string{"assumed (not in the history, taken as passing): Deployment sched exists and is not rolling out", "owner chain"} {
		if !strings.Contains(head, want) {
			t.Errorf("the report's header lacks %q:\n%s", want, head)
		}
	}
}

// TestRepeatWedgeRunMode: the repeat wedges as `watchdog run --interval 30s`
// sees them: two restarts, each within 3 minutes of its wedge, none blocked.
func TestRepeatWedgeRunMode(t *testing.T) {
	h := history(2*time.Hour, wedgedIn([2]time.Duration{12 * time.Minute, 40 * time.Minute}, [2]time.Duration{60 * time.Minute, 3 * time.Hour}), noRejections)
	cfg := config()
	cfg.Interval = 30 * time.Second
	res := replay(t, h, cfg)
	if len(res.Restarts) != 2 || len(res.Blocked) != 0 || res.Summary.WorstWedge.D() > 3*time.Minute {
		t.Errorf("restarts %+v, blocked %d, worst %s: want two, none blocked, each within 3m", res.Restarts, len(res.Blocked), res.Summary.WorstWedge.D())
	}
	if len(res.StopGap.Restarts) != 2 || res.StopGap.Summary.WorstWedge <= res.Summary.WorstWedge {
		t.Errorf("stop-gap restarts %+v, worst %s: want 2, slower than the watchdog's %s", res.StopGap.Restarts, res.StopGap.Summary.WorstWedge.D(), res.Summary.WorstWedge.D())
	}
}

// The replay reads the accepted-heartbeat counter too: the decision bridges a
// gap of failed samples only while both heartbeat counters stand still, so a
// replay that read the accepted counter as 0 throughout would bridge a gap in
// the data during which the scheduler healed. Checked before: HeartbeatOK 0.
func TestObservationCarriesTheAcceptedHeartbeats(t *testing.T) {
	h := history(time.Hour, func(time.Time) float64 { return 3 }, func(time.Time) (float64, bool) { return 0, false })
	h.Accepted = []*model.SampleStream{stream(pod1, series(t0, t0.Add(time.Hour), 15*time.Second, func(t time.Time) (float64, bool) {
		return float64(t.Sub(t0) / (5 * time.Second) * 3), true
	}))}
	obs := newColumn(t, h, config()).observation(t0.Add(10 * time.Minute))
	if len(obs.Pods) != 1 || obs.Pods[0].Sample == nil || obs.Pods[0].Sample.HeartbeatOK != 360 {
		t.Fatalf("observation at +10m: %+v, want the accepted counter 360", obs.Pods)
	}
}

// TestReportEscapesTextFromTheHistory: pod names, warnings and gate details come
// from Prometheus labels and the API server, which others write; the text report
// must not pass an escape sequence or a forged line to the terminal.
func TestReportEscapesTextFromTheHistory(t *testing.T) {
	hostile := "sched-0\x1b]52;c;cm0gLXJm\a\nwatchdog: all healthy"
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	res := &Result{From: at, To: at.Add(time.Hour), Pods: []string{hostile}, Warnings: []string{hostile},
		Restarts: []Restart{{Pod: hostile, At: at, Gates: hostile}},
		Blocked:  []Blocked{{Pod: hostile, At: at, Gates: []decide.Gate{{Name: "g", Detail: hostile}}}}}
	var text strings.Builder
	if err := res.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if strings.ContainsAny(text.String(), "\x1b\a") || strings.Contains(text.String(), "\nwatchdog: all healthy") {
		t.Errorf("the text report passes control characters through:\n%q", text.String())
	}
	if !strings.Contains(text.String(), `sched-0\x1b]52;c;cm0gLXJm\x07\nwatchdog: all healthy`) {
		t.Errorf("the text report does not show the escaped name:\n%s", text.String())
	}
}
