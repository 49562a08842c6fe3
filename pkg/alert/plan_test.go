package alert_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentenv/watchdog/pkg/alert"

	"github.com/agentenv/watchdog/internal/alerttest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/state"
)

// t0 is the fixed start of every planned sequence.
// The fixtures the sinks' tests share (internal/alerttest).
var (
	t0                         = alerttest.T0
	intp                       = alerttest.IntP
	planConfig, target, result = alerttest.PlanConfig, alerttest.Target, alerttest.Result
	src                        = alerttest.Source
)

func unknownResult() decide.Result {
	return decide.Result{Verdict: state.VerdictUnknown, Action: state.ActionNone, Reason: "scrape refused: connection refused",
		Targets: []decide.Target{{Pod: "agentenv-scheduler-abc12", UID: "7f3c9a52-uid", Judged: true, Verdict: state.VerdictUnknown, Action: state.ActionNone, Reason: "scrape refused"}}}
}

// step is one run: what it observed and did, and what it must send. Sent names
// events in order; "+r" marks a reminder.
type step struct {
	at     time.Duration
	res    func(now time.Time) decide.Result
	acts   func(now time.Time) []alert.ActOutcome
	runErr error
	sent   []string
	check  func(t *testing.T, notes []alert.Notification, s *state.State)
}

func wedged(a state.Action, badFor time.Duration) func(time.Time) decide.Result {
	return func(now time.Time) decide.Result { return result(target(state.VerdictWedged, a, badFor, now)) }
}

// blockedBy is a wedged target whose restart is due and refused by gate alone.
func blockedBy(gate decide.Gate) func(time.Time) decide.Result {
	return func(now time.Time) decide.Result {
		t := target(state.VerdictWedged, state.ActionBlocked, 5*time.Minute, now)
		t.Gates = []decide.Gate{{Name: "wedged-for", OK: true, Detail: "wedged 5m ≥ 2m30s"}, gate}
		return result(t)
	}
}

func degraded(badFor time.Duration) func(time.Time) decide.Result {
	return func(now time.Time) decide.Result {
		t := target(state.VerdictDegraded, state.ActionWait, badFor, now)
		t.Ready = intp(2)
		return result(t)
	}
}

func healthy(time.Time) decide.Result {
	return result(target(state.VerdictHealthy, state.ActionNone, 0, t0))
}

func unknown(time.Time) decide.Result { return unknownResult() }

func restartDone(now time.Time) []alert.ActOutcome {
	return []alert.ActOutcome{{Target: target(state.VerdictWedged, state.ActionRestart, 5*time.Minute, now), Detail: "pod deleted (UID precondition)"}}
}

func restartErr(now time.Time) []alert.ActOutcome {
	return []alert.ActOutcome{{Target: target(state.VerdictWedged, state.ActionRestart, 5*time.Minute, now), Err: errors.New(`pods "agentenv-scheduler-abc12" is forbidden: cannot delete`)}}
}

func names(notes []alert.Notification) []string {
	out := []string{}
	for _, n := range notes {
		name := n.Event
		if n.Reminder {
			name += "+r"
		}
		out = append(out, name)
	}
	return out
}

func TestPlan(t *testing.T) {
	cases := []struct {
		name  string
		cfg   func(*alert.PlanConfig)
		steps []step
	}{
		{
			name: "wedged is alerted once per transition",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: 5 * time.Minute, res: wedged(state.ActionWait, 5*time.Minute), sent: []string{}},
				{at: 10 * time.Minute, res: wedged(state.ActionWait, 10*time.Minute), sent: []string{}},
			},
		},
		{
			name: "reminder after the realert interval and not before",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: time.Hour - time.Second, res: wedged(state.ActionWait, time.Hour), sent: []string{}},
				{at: time.Hour, res: wedged(state.ActionWait, time.Hour), sent: []string{"wedged+r"}},
				{at: time.Hour + 30*time.Minute, res: wedged(state.ActionWait, 90*time.Minute), sent: []string{}},
				{at: 2*time.Hour - time.Second, res: wedged(state.ActionWait, 2*time.Hour), sent: []string{}},
				{at: 2 * time.Hour, res: wedged(state.ActionWait, 2*time.Hour), sent: []string{"wedged+r"},
					check: func(t *testing.T, _ []alert.Notification, s *state.State) {
						if a := s.Alerts[alert.EventWedged]; a == nil || a.Sends != 3 || !a.OpenedAt.Equal(t0) {
							t.Errorf("wedged alert bookkeeping %+v, want 3 sends, opened at t0", a)
						}
					}},
			},
		},
		{
			name: "reminder interval is configurable",
			cfg:  func(c *alert.PlanConfig) { c.RealertInterval = 2 * time.Second },
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: time.Second, res: wedged(state.ActionWait, time.Second), sent: []string{}},
				{at: 2 * time.Second, res: wedged(state.ActionWait, 2*time.Second), sent: []string{"wedged+r"}},
			},
		},
		{
			name: "recovered exactly once per episode",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: 5 * time.Minute, res: healthy, sent: []string{"recovered"},
					check: func(t *testing.T, notes []alert.Notification, s *state.State) {
						n := notes[0]
						if n.Severity != alert.SeverityInfo || n.Since == nil || !n.Since.Equal(t0) || !strings.Contains(n.Reason, "was wedged since") {
							t.Errorf("recovered %+v: want severity info, since t0, reason naming wedged", n)
						}
						if len(s.Alerts) != 0 {
							t.Errorf("alerts still open after recovery: %v", s.Alerts)
						}
					}},
				{at: 10 * time.Minute, res: healthy, sent: []string{}},
				{at: 2 * time.Hour, res: healthy, sent: []string{}},
				// A new episode is a new transition, not a reminder.
				{at: 3 * time.Hour, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: 3*time.Hour + time.Minute, res: healthy, sent: []string{"recovered"}},
				{at: 3*time.Hour + 2*time.Minute, res: healthy, sent: []string{}},
			},
		},
		{
			name: "no-nodes also closes the episode",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: time.Minute, res: func(time.Time) decide.Result {
					return decide.Result{Verdict: state.VerdictNoNodes, Action: state.ActionNone, Reason: "no serving node endpoints"}
				}, sent: []string{"recovered"}},
			},
		},
		{
			name: "healthy with nothing open sends nothing",
			steps: []step{
				{at: 0, res: healthy, sent: []string{}},
				{at: time.Hour, res: healthy, sent: []string{}},
			},
		},
		{
			name: "restart-blocked opens alongside wedged and is deduplicated",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: 5 * time.Minute, res: func(now time.Time) decide.Result {
					tg := target(state.VerdictWedged, state.ActionBlocked, 5*time.Minute, now)
					tg.Gates = []decide.Gate{{Name: "budget", OK: false, Detail: "budget 3/3 used in 1h"}}
					return result(tg)
				}, sent: []string{"restart-blocked"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						n := notes[0]
						if n.Severity != alert.SeverityCritical || n.Action != "blocked" || !strings.Contains(n.Reason, "✗ budget 3/3 used in 1h") {
							t.Errorf("restart-blocked %+v: want critical, action blocked, the failing gate in the reason", n)
						}
					}},
				{at: 10 * time.Minute, res: wedged(state.ActionBlocked, 10*time.Minute), sent: []string{}},
				{at: 65 * time.Minute, res: wedged(state.ActionBlocked, 65*time.Minute), sent: []string{"restart-blocked+r", "wedged+r"}},
			},
		},
		{
			name: "degraded only after it lasted WedgedFor",
			steps: []step{
				{at: 0, res: degraded(time.Second), sent: []string{}},
				{at: 3*time.Minute + 59*time.Second, res: degraded(3*time.Minute + 59*time.Second), sent: []string{}},
				{at: 4 * time.Minute, res: degraded(4 * time.Minute), sent: []string{"degraded"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						if n := notes[0]; n.Severity != alert.SeverityWarning || *n.Ready != 2 || *n.Expected != 3 {
							t.Errorf("degraded %+v", n)
						}
					}},
				{at: 10 * time.Minute, res: degraded(10 * time.Minute), sent: []string{}},
				{at: 11 * time.Minute, res: healthy, sent: []string{"recovered"}},
			},
		},
		{
			name: "blind after BlindAfter unknown runs, once",
			steps: []step{
				{at: 0, res: unknown, sent: []string{}},
				{at: 5 * time.Minute, res: unknown, sent: []string{}},
				{at: 10 * time.Minute, res: unknown, sent: []string{"blind"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						n := notes[0]
						if n.Severity != alert.SeverityWarning || n.Verdict != "unknown" || !strings.Contains(n.Reason, "unknown in 3 runs since the scheduler was last seen fine") || n.Pod != "" {
							t.Errorf("blind %+v", n)
						}
					}},
				{at: 15 * time.Minute, res: unknown, sent: []string{}},
				{at: 70 * time.Minute, res: unknown, sent: []string{"blind+r"}},
				{at: 75 * time.Minute, res: healthy, sent: []string{"recovered"}},
			},
		},
		{
			// A wedge seen only between unknown runs: the wedged run does not reset
			// the unknown count, so blind stays open (no repeat) until a run sees
			// the scheduler fine.
			name: "blind stays open across the bad runs of an episode",
			cfg:  func(c *alert.PlanConfig) { c.BlindAfter = 2 },
			steps: []step{
				{at: 0, res: unknown, sent: []string{}},
				{at: time.Minute, res: unknown, sent: []string{"blind"}},
				{at: 2 * time.Minute, res: wedged(state.ActionWait, 0), sent: []string{"wedged"},
					check: func(t *testing.T, _ []alert.Notification, s *state.State) {
						if _, open := s.Alerts[alert.EventBlind]; !open {
							t.Error("a wedged run between unknown runs closed blind")
						}
					}},
				{at: 3 * time.Minute, res: unknown, sent: []string{}},
				{at: 4 * time.Minute, res: healthy, sent: []string{"recovered"}},
			},
		},
		{
			name: "blind closes without recovered on starting",
			cfg:  func(c *alert.PlanConfig) { c.BlindAfter = 2 },
			steps: []step{
				{at: 0, res: unknown, sent: []string{}},
				{at: time.Minute, res: unknown, sent: []string{"blind"}},
				{at: 2 * time.Minute, res: func(time.Time) decide.Result {
					return decide.Result{Verdict: state.VerdictStarting, Action: state.ActionNone, Reason: "starting"}
				}, sent: []string{},
					check: func(t *testing.T, _ []alert.Notification, s *state.State) {
						if _, open := s.Alerts[alert.EventBlind]; open {
							t.Error("blind still open although the scheduler is seen fine again")
						}
					}},
				{at: 3 * time.Minute, res: unknown, sent: []string{}},
				{at: 4 * time.Minute, res: unknown, sent: []string{"blind"}},
			},
		},
		{
			name: "restarted is a one-shot, then recovered",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: 5 * time.Minute, res: wedged(state.ActionRestart, 5*time.Minute), acts: restartDone, sent: []string{"restarted"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						n := notes[0]
						if n.Severity != alert.SeverityWarning || !strings.HasPrefix(n.Reason, "pod deleted (UID precondition) (") || n.Pod != "agentenv-scheduler-abc12" {
							t.Errorf("restarted %+v", n)
						}
					}},
				// The new pod is starting: nothing new, nothing closed.
				{at: 6 * time.Minute, res: func(time.Time) decide.Result {
					return result(decide.Target{Pod: "agentenv-scheduler-new", UID: "new", Judged: true, Verdict: state.VerdictStarting, Action: state.ActionNone})
				}, sent: []string{}},
				{at: 8 * time.Minute, res: healthy, sent: []string{"recovered"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						if !strings.Contains(notes[0].Reason, "restarted, wedged") {
							t.Errorf("recovered reason %q does not name what was open", notes[0].Reason)
						}
					}},
			},
		},
		{
			name: "restart-failed is sent for every failed attempt",
			steps: []step{
				{at: 0, res: wedged(state.ActionRestart, 5*time.Minute), acts: restartErr, sent: []string{"wedged", "restart-failed"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						var n alert.Notification
						for _, x := range notes {
							if x.Event == alert.EventRestartFailed {
								n = x
							}
						}
						if n.Severity != alert.SeverityCritical || !strings.Contains(n.Reason, "forbidden: cannot delete") {
							t.Errorf("restart-failed %+v", n)
						}
					}},
				{at: time.Minute, res: wedged(state.ActionRestart, 6*time.Minute), acts: restartErr, sent: []string{"restart-failed"}},
			},
		},
		{
			name: "watchdog-error from a run error: once, reminded, closed on a clean run",
			cfg:  func(c *alert.PlanConfig) { c.BlindAfter = 10 },
			steps: []step{
				{at: 0, res: unknown, runErr: errors.New("count serving nodes: endpointslices is forbidden"), sent: []string{"watchdog-error"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						n := notes[0]
						if n.Severity != alert.SeverityCritical || !strings.Contains(n.Reason, "cannot do its job: count serving nodes") {
							t.Errorf("watchdog-error %+v", n)
						}
					}},
				{at: time.Minute, res: unknown, runErr: errors.New("still forbidden"), sent: []string{}},
				{at: 61 * time.Minute, res: unknown, runErr: errors.New("still forbidden"), sent: []string{"watchdog-error+r"}},
				{at: 62 * time.Minute, res: healthy, sent: []string{"recovered"},
					check: func(t *testing.T, notes []alert.Notification, s *state.State) {
						if _, open := s.Alerts[alert.EventWatchdogError]; open {
							t.Error("watchdog-error still open after a clean run")
						}
						if n := notes[0]; !strings.Contains(n.Reason, "watchdog-error") || n.Since == nil || !n.Since.Equal(t0) {
							t.Errorf("recovered must name watchdog-error and when it opened: %+v", n)
						}
					}},
				{at: 63 * time.Minute, res: unknown, runErr: errors.New("forbidden again"), sent: []string{"watchdog-error"}},
				// A clean run that finds the scheduler wedged closes watchdog-error
				// silently: the wedged alert is the news.
				{at: 64 * time.Minute, res: wedged(state.ActionWait, 0), sent: []string{"wedged"},
					check: func(t *testing.T, _ []alert.Notification, s *state.State) {
						if _, open := s.Alerts[alert.EventWatchdogError]; open {
							t.Error("watchdog-error still open after a clean run")
						}
					}},
				{at: 70 * time.Minute, res: healthy, sent: []string{"recovered"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						if strings.Contains(notes[0].Reason, "watchdog-error") {
							t.Errorf("recovered lists watchdog-error, closed earlier: %q", notes[0].Reason)
						}
					}},
			},
		},
		{
			name: "watchdog-error stays open through clean runs that raise nothing, until recovered",
			steps: []step{
				{at: 0, res: unknown, runErr: errors.New("get Lease: forbidden"), sent: []string{"watchdog-error"}},
				{at: time.Minute, res: unknown, sent: []string{}},
				{at: 2 * time.Minute, res: func(now time.Time) decide.Result {
					return result(target(state.VerdictStarting, state.ActionNone, 0, now))
				}, sent: []string{}},
				{at: 3 * time.Minute, res: degraded(time.Minute), sent: []string{}},
				{at: 4 * time.Minute, res: healthy, sent: []string{"recovered"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						if !strings.Contains(notes[0].Reason, "watchdog-error") {
							t.Errorf("recovered does not name watchdog-error: %q", notes[0].Reason)
						}
					}},
			},
		},
		{
			name: "a run with an error is never recovered, even if what it saw was healthy",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: time.Minute, res: healthy, runErr: errors.New("get Lease: forbidden"), sent: []string{"watchdog-error"},
					check: func(t *testing.T, _ []alert.Notification, s *state.State) {
						if s.Alerts[alert.EventWedged] == nil || s.Alerts[alert.EventWatchdogError] == nil {
							t.Errorf("open alerts %v, want wedged and watchdog-error", s.Alerts)
						}
					}},
				{at: 2 * time.Minute, res: healthy, sent: []string{"recovered"}},
			},
		},
		{
			// The loser of a claim race, or the old pod of a rollout still running
			// while its replacement starts: not a blocked restart, no page.
			name: "a restart already in progress is not paged as blocked",
			steps: []step{
				{at: 0, res: wedged(state.ActionWait, 0), sent: []string{"wedged"}},
				{at: 5 * time.Minute, res: blockedBy(decide.Gate{Name: "once-per-wedge", InProgress: true, Detail: "restart already in progress: claimed by another run"}), sent: []string{}},
				{at: 6 * time.Minute, res: blockedBy(decide.Gate{Name: "once-per-wedge", Detail: "already restarted at t0, and this pod is still running and bad 4m later"}), sent: []string{"restart-blocked"}},
			},
		},
		{
			name: "restarts that do not heal say so once, not as restart-blocked",
			steps: []step{
				{at: 0, res: func(now time.Time) decide.Result {
					r := blockedBy(decide.Gate{Name: decide.GateBackoff, Detail: "1 restart(s) in a row did not heal; backing off"})(now)
					r.Targets[0].Ineffective = "the delete of pod agentenv-scheduler-old at t0 did not heal the scheduler"
					return r
				}, sent: []string{"restart-ineffective", "wedged"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						n := notes[0]
						if n.Severity != alert.SeverityCritical || !strings.Contains(n.Reason, "did not heal the scheduler") || !strings.Contains(n.Reason, "backing off") || !strings.Contains(n.NextStep, "outside the scheduler") {
							t.Errorf("restart-ineffective %+v", n)
						}
					}},
				{at: 70 * time.Minute, res: func(now time.Time) decide.Result {
					r := blockedBy(decide.Gate{Name: decide.GateBackoff, Detail: "2 restart(s) in a row did not heal; backing off"})(now)
					r.Targets[0].Ineffective = "the delete of pod agentenv-scheduler-old2 did not heal the scheduler"
					return r
				}, sent: []string{"restart-ineffective+r", "wedged+r"}},
				{at: 80 * time.Minute, res: healthy, sent: []string{"recovered"},
					check: func(t *testing.T, notes []alert.Notification, _ *state.State) {
						if !strings.Contains(notes[0].Reason, "restart-ineffective") {
							t.Errorf("recovered must name restart-ineffective: %q", notes[0].Reason)
						}
					}},
			},
		},
		{
			name: "targets not judged (HA standbys) are never alerted",
			steps: []step{
				{at: 0, res: func(now time.Time) decide.Result {
					standby := target(state.VerdictWedged, state.ActionNone, time.Hour, now)
					standby.Judged, standby.Pod = false, "standby"
					return result(target(state.VerdictHealthy, state.ActionNone, 0, now), standby)
				}, sent: []string{}},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := planConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			s := state.New()
			for i, st := range tc.steps {
				now := t0.Add(st.at)
				res := st.res(now)
				decide.CountRun(s, res.Verdict) // as check.Run does before planning
				var acts []alert.ActOutcome
				if st.acts != nil {
					acts = st.acts(now)
				}
				notes := alert.Plan(s, res, acts, st.runErr, now, src, state.ModeLive, cfg)
				if got := names(notes); !reflect.DeepEqual(got, st.sent) {
					t.Fatalf("step %d (t0+%s): sent %v, want %v", i, st.at, got, st.sent)
				}
				for _, n := range notes {
					checkCommon(t, n, now, state.ModeLive)
				}
				if st.check != nil {
					st.check(t, notes, s)
				}
				// The state survives a round trip through the ConfigMap encoding.
				b, err := state.Encode(s, now)
				if err != nil {
					t.Fatal(err)
				}
				if s, err = state.Decode(b); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// checkCommon checks what every planned notification carries.
func checkCommon(t *testing.T, n alert.Notification, now time.Time, mode state.Mode) {
	t.Helper()
	if n.SchemaVersion != alert.SchemaVersion || n.Cluster != src.Cluster || n.Namespace != src.Namespace || n.Watchdog != src.Version {
		t.Errorf("%s: schema %d cluster %q namespace %q version %q", n.Event, n.SchemaVersion, n.Cluster, n.Namespace, n.Watchdog)
	}
	if !n.Time.Equal(now) || n.Time.Location() != time.UTC {
		t.Errorf("%s: time %s, want %s in UTC", n.Event, n.Time, now)
	}
	if n.Severity == "" || n.Severity != alert.Spec(n.Event).Severity || n.NextStep == "" || len(n.ID) != 16 || n.Reason == "" {
		t.Errorf("%s: incomplete notification %+v", n.Event, n)
	}
	if n.DryRun != (mode == state.ModeDryRun) {
		t.Errorf("%s: dryRun %v, want %v", n.Event, n.DryRun, mode == state.ModeDryRun)
	}
}

func TestPlanCarriesTargetDetails(t *testing.T) {
	s := state.New()
	res := wedged(state.ActionWait, 0)(t0)
	res.Targets[0].BadFor = 0
	notes := alert.Plan(s, res, nil, nil, t0, src, state.ModeLive, planConfig())
	if len(notes) != 1 {
		t.Fatalf("got %v", names(notes))
	}
	n := notes[0]
	if n.Pod != "agentenv-scheduler-abc12" || n.UID != "7f3c9a52-uid" || n.Verdict != "wedged" || n.Action != "wait" ||
		*n.Ready != 0 || *n.Expected != 3 || n.Since == nil || !n.Since.Equal(t0) || n.Evidence != "strong" {
		t.Errorf("notification does not carry the target: %+v", n)
	}
	if a := s.Alerts[alert.EventWedged]; a.Pod != n.Pod || a.Sends != 1 || a.LastSentAt == nil || !a.LastSentAt.Equal(t0) {
		t.Errorf("state alert %+v", a)
	}
}

func TestPlanDryRunFlagInPayloads(t *testing.T) {
	for _, dry := range []bool{false, true} {
		cfg, mode := planConfig(), state.ModeLive
		if dry {
			mode = state.ModeDryRun
		}
		s := state.New()
		var all []alert.Notification
		all = append(all, alert.Plan(s, wedged(state.ActionWait, 0)(t0), nil, nil, t0, src, mode, cfg)...)
		all = append(all, alert.Plan(s, wedged(state.ActionRestart, 5*time.Minute)(t0.Add(5*time.Minute)), restartDone(t0.Add(5*time.Minute)), nil, t0.Add(5*time.Minute), src, mode, cfg)...)
		all = append(all, alert.Plan(s, healthy(t0), nil, nil, t0.Add(10*time.Minute), src, mode, cfg)...)
		all = append(all, alert.PlanFailure(state.New(), errors.New("boom"), t0, src, mode, cfg)...)
		if got := names(all); !reflect.DeepEqual(got, []string{"wedged", "restarted", "recovered", "watchdog-error"}) {
			t.Fatalf("dry=%v: sent %v", dry, got)
		}
		for _, n := range all {
			if n.DryRun != dry {
				t.Errorf("dry=%v: %s carries dryRun=%v", dry, n.Event, n.DryRun)
			}
		}
	}
}

func TestPlanFailure(t *testing.T) {
	cfg, mode := planConfig(), state.ModeLive
	// With no readable state, every failed run alerts.
	for i := 0; i < 2; i++ {
		notes := alert.PlanFailure(state.New(), errors.New("read state ConfigMap: forbidden"), t0.Add(time.Duration(i)*time.Minute), src, mode, cfg)
		if got := names(notes); !reflect.DeepEqual(got, []string{"watchdog-error"}) {
			t.Fatalf("run %d: %v", i, got)
		}
		if n := notes[0]; n.Verdict != "unknown" || n.Action != "none" || n.Pod != "" || !strings.Contains(n.Reason, "read state ConfigMap: forbidden") {
			t.Errorf("watchdog-error %+v", n)
		}
	}
	// With a state to remember it in, once per realert interval.
	s := state.New()
	for _, st := range []struct {
		at   time.Duration
		want []string
	}{{0, []string{"watchdog-error"}}, {59 * time.Minute, []string{}}, {60 * time.Minute, []string{"watchdog-error+r"}}} {
		if got := names(alert.PlanFailure(s, errors.New("list pods: forbidden"), t0.Add(st.at), src, mode, cfg)); !reflect.DeepEqual(got, st.want) {
			t.Errorf("t0+%s: %v, want %v", st.at, got, st.want)
		}
	}
}

func TestPlanIDsDiffer(t *testing.T) {
	s := state.New()
	notes := alert.Plan(s, wedged(state.ActionRestart, 5*time.Minute)(t0), restartDone(t0), nil, t0, src, state.ModeLive, planConfig())
	if len(notes) != 2 {
		t.Fatalf("got %v", names(notes))
	}
	if notes[0].ID == notes[1].ID {
		t.Errorf("two notifications share ID %s", notes[0].ID)
	}
}

// Only the watchdog's words leave it: an open alert under a name the
// event table does not know, written into the state by someone else, is neither
// closed by name in recovered nor named in its text.
func TestRecoveredClosesOnlyTheWatchdogsEvents(t *testing.T) {
	s := state.New()
	s.Alerts[alert.EventWedged] = &state.Alert{Event: alert.EventWedged, OpenedAt: t0, Pod: "agentenv-scheduler-abc12", Sends: 1}
	s.Alerts["all clear, ignore the pager"] = &state.Alert{Event: "x", OpenedAt: t0}
	notes := alert.Plan(s, healthy(t0), nil, nil, t0.Add(5*time.Minute), src, state.ModeLive, planConfig())
	if len(notes) != 1 || notes[0].Event != alert.EventRecovered {
		t.Fatalf("got %v", names(notes))
	}
	n := notes[0]
	if len(n.Closes) != 1 || n.Closes[0].Event != alert.EventWedged || strings.Contains(n.Reason, "ignore the pager") {
		t.Errorf("recovered closes %+v, reason %q", n.Closes, n.Reason)
	}
}

// A pause annotation decide told about (Result.PauseNotice) is one warning alert.
func TestPlanPauseNotice(t *testing.T) {
	res := healthy(t0)
	res.PauseNotice = "pause annotation on Deployment agentenv-scheduler ignored: no reason"
	notes := alert.Plan(state.New(), res, nil, nil, t0, src, state.ModeLive, planConfig())
	if got := names(notes); !reflect.DeepEqual(got, []string{alert.EventPauseInvalid}) || notes[0].Severity != alert.SeverityWarning || notes[0].Reason != res.PauseNotice {
		t.Fatalf("planned %v %+v", got, notes)
	}
}
