package check_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"

	"github.com/agentenv/watchdog/internal/autoclock"
	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/alert"
	"github.com/agentenv/watchdog/pkg/check"
	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/restart"
	"github.com/agentenv/watchdog/pkg/state"
	"github.com/agentenv/watchdog/pkg/statestore"
)

// In-memory collaborators for check.Runner, driven by a fake clock.

// t0 is far in the future: a pass's deadline is set from the fake clock, and a
// context with that deadline must not expire in real time while the test runs.
var t0 = time.Date(2100, 3, 1, 12, 0, 0, 0, time.UTC)

// calls is an ordered log of what the fakes were asked to do, shared by them.
type calls struct {
	mu  sync.Mutex
	log []string
}

func (c *calls) add(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.log = append(c.log, s)
}

func (c *calls) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.log...)
}

func (c *calls) count(s string) int {
	n := 0
	for _, l := range c.list() {
		if l == s {
			n++
		}
	}
	return n
}

// fakeObserver answers with see(kind, now), kind "observe" or "consistent"; the
// observation's time (when it began) and consistency are filled in as the real
// observer does. A
// cancelled context fails the read, as an API call would.
type fakeObserver struct {
	clk     *autoclock.Clock
	calls   *calls
	see     func(kind string, now time.Time) (decide.Observation, error)
	rollout decide.Rollout
	// took is how long each observation takes (pod and EndpointSlice lists, the
	// scrape): the clock moves on by it before the observation is taken.
	took time.Duration
	// apiTook is how long the Deployment read takes.
	apiTook time.Duration
	// rolloutErr, when set, is asked before each Deployment read: an error fails it.
	rolloutErr func() error
}

func (o *fakeObserver) read(ctx context.Context, kind string) (decide.Observation, error) {
	o.calls.add(kind)
	if err := ctx.Err(); err != nil {
		return decide.Observation{}, err
	}
	began := o.clk.Now()
	o.clk.Step(o.took)
	obs, err := o.see(kind, o.clk.Now())
	if err != nil {
		return decide.Observation{}, err
	}
	obs.At, obs.Consistent = began, kind == "consistent"
	return obs, nil
}

func (o *fakeObserver) Observe(ctx context.Context) (decide.Observation, error) {
	return o.read(ctx, "observe")
}

func (o *fakeObserver) ObserveConsistent(ctx context.Context) (decide.Observation, error) {
	return o.read(ctx, "consistent")
}

func (o *fakeObserver) Rollout(context.Context, ...decide.Pod) *decide.Rollout {
	o.calls.add("rollout")
	o.clk.Step(o.apiTook)
	r := o.rollout
	if o.rolloutErr != nil {
		r.Err = o.rolloutErr()
	}
	return &r
}

// fakeStore is a statestore.MemoryStore whose next loads and saves can be made to fail
// or be preceded by another writer.
type fakeStore struct {
	*statestore.MemoryStore
	calls *calls

	mu sync.Mutex
	// loadHooks and saveHooks run before the next loads and saves, one each, in
	// order; an error fails that call, a nil hook lets it through.
	loadHooks, saveHooks []func() error
	saves                int
	// clk and saveTook: each save takes saveTook of clk's time.
	clk      *autoclock.Clock
	saveTook time.Duration
}

func (s *fakeStore) next(hooks *[]func() error) func() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(*hooks) == 0 {
		return nil
	}
	h := (*hooks)[0]
	*hooks = (*hooks)[1:]
	return h
}

func (s *fakeStore) Load(ctx context.Context) (*statestore.Snapshot, error) {
	s.calls.add("load")
	if h := s.next(&s.loadHooks); h != nil {
		if err := h(); err != nil {
			return nil, err
		}
	}
	return s.MemoryStore.Load(ctx)
}

func (s *fakeStore) Save(ctx context.Context, snap *statestore.Snapshot, st *state.State, now time.Time) error {
	s.calls.add("save")
	if s.clk != nil {
		s.clk.Step(s.saveTook)
	}
	if h := s.next(&s.saveHooks); h != nil {
		if err := h(); err != nil {
			return err
		}
	}
	err := s.MemoryStore.Save(ctx, snap, st, now)
	if err == nil {
		s.mu.Lock()
		s.saves++
		s.mu.Unlock()
	}
	return err
}

// current is the stored state, as the next run would read it.
func (s *fakeStore) current(t *testing.T) *state.State {
	t.Helper()
	snap, err := s.MemoryStore.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return snap.State
}

// fakeRestarter records restarts; onRestart, when set, decides their outcome.
type fakeRestarter struct {
	calls     *calls
	onRestart func(ctx context.Context, name, uid string) (restart.Result, error)
	// clk and took: each restart request takes took of clk's time.
	clk  *autoclock.Clock
	took time.Duration
}

func (r *fakeRestarter) Method() string { return decide.MethodDelete }

func (r *fakeRestarter) Restart(ctx context.Context, name, uid string) (restart.Result, error) {
	r.calls.add("restart " + name)
	if r.clk != nil {
		r.clk.Step(r.took)
	}
	if r.onRestart != nil {
		return r.onRestart(ctx, name, uid)
	}
	return restart.Result{Detail: "deleted pod " + name}, nil
}

// fakeSink records what it is sent; while fail is set it refuses everything.
type fakeSink struct {
	mu   sync.Mutex
	sent []alert.Notification
	fail error
}

func (s *fakeSink) Name() string { return "webhook" }

func (s *fakeSink) Send(_ context.Context, n alert.Notification) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.sent = append(s.sent, n)
	return nil
}

func (s *fakeSink) events() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.sent {
		out = append(out, n.Event)
	}
	return out
}

// fakeEvents records Events as "Reason Kind/Name".
type fakeEvents struct {
	mu  sync.Mutex
	got []string
}

func (e *fakeEvents) Emit(_ context.Context, obj corev1.ObjectReference, _, reason, _ string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, reason+" "+obj.Kind+"/"+obj.Name)
	return nil
}

func (e *fakeEvents) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.got...)
}

// The scheduler as the fakes show it: one pod, started an hour before t0, with
// three serving nodes listed.
const (
	podName = "agentenv-scheduler-abc12"
	podUID  = "uid-a"
)

func schedPod(ready int, rejected uint64) decide.Pod {
	return podtest.Pod(podName, t0.Add(-time.Hour), podtest.UID(podUID), podtest.Scraped(ready, rejected))
}

func observation(serving int, pods ...decide.Pod) decide.Observation {
	return decide.Observation{Expected: endpoints.Count{Serving: serving, Slices: 1, AllSlices: 1}, Pods: pods}
}

// wedgedWeak is a wedge with weak evidence: ready 0 of 3, no counter moving.
func wedgedWeak(string, time.Time) (decide.Observation, error) {
	return observation(3, schedPod(0, 11)), nil
}

// wedgedStrong is a wedge with strong evidence: rejected heartbeats rise by one a second.
func wedgedStrong(_ string, now time.Time) (decide.Observation, error) {
	return observation(3, schedPod(0, 100+uint64(now.Sub(t0)/time.Second))), nil
}

func healthy(string, time.Time) (decide.Observation, error) {
	return observation(3, schedPod(3, 0)), nil
}

// podsForbidden is a pod list refused (missing RBAC, say): nothing can be judged.
func podsForbidden(string, time.Time) (decide.Observation, error) {
	return decide.Observation{}, errors.New(`pods is forbidden: User "system:serviceaccount:agentenv:watchdog" cannot list resource "pods"`)
}

// harness is one installation: the fakes every pass of a test shares.
type harness struct {
	t         *testing.T
	clk       *autoclock.Clock
	calls     *calls
	obs       *fakeObserver
	store     *fakeStore
	restarter *fakeRestarter
	sink      *fakeSink
	events    *fakeEvents
	logs      *bytes.Buffer
	opts      check.Options
	// timeout is each pass's deadline from its start (--timeout).
	timeout time.Duration
}

func newHarness(t *testing.T) *harness {
	clk := autoclock.New(t0)
	c := &calls{}
	return &harness{
		t:         t,
		clk:       clk,
		calls:     c,
		obs:       &fakeObserver{clk: clk, calls: c, see: wedgedWeak, rollout: decide.Rollout{Name: "agentenv-scheduler", UID: "uid-deploy", Found: true}},
		store:     &fakeStore{MemoryStore: &statestore.MemoryStore{Namespace: "agentenv", Name: "agentenv-scheduler-watchdog"}, calls: c, clk: clk},
		restarter: &fakeRestarter{calls: c, clk: clk},
		sink:      &fakeSink{},
		events:    &fakeEvents{},
		logs:      &bytes.Buffer{},
		timeout:   3 * time.Minute,
		opts: check.Options{
			Decide: decide.Config{
				StartupGrace:  2 * time.Minute,
				WedgedFor:     4 * time.Minute,
				MaxRestarts:   3,
				RestartWindow: time.Hour,
				RestartMethod: decide.MethodDelete,
				ClaimTimeout:  3 * time.Minute,
			},
			Alerts:         alert.PlanConfig{RealertInterval: time.Hour, BlindAfter: 3, WedgedFor: 4 * time.Minute},
			Source:         alert.Source{Cluster: "test", Namespace: "agentenv", Version: "test"},
			SampleInterval: 15 * time.Second,
			StateConfigMap: "agentenv-scheduler-watchdog",
		},
	}
}

// productionDefaults sets the decision and the pass to the flags' defaults
// (pkg/cli), as the chart runs them.
func (h *harness) productionDefaults() {
	d := &h.opts.Decide
	d.StartupGrace, d.WedgedFor, d.ConfirmWindow = cli.DefaultStartupGrace, cli.DefaultWedgedFor, cli.DefaultConfirmWindow
	d.ClaimTimeout = cli.DefaultTimeout
	d.IneffectiveWithin, d.BackoffBase, d.BackoffMax, d.BackoffReset = decide.DefaultIneffectiveWithin, decide.DefaultBackoffBase, decide.DefaultBackoffMax, decide.DefaultBackoffReset
	h.opts.Alerts.WedgedFor = cli.DefaultWedgedFor
	h.opts.SampleInterval = cli.DefaultSampleInterval
	h.timeout = cli.DefaultTimeout
}

// slowAPI makes every API call of a pass slow: each observation takes took, and
// each other call (the Deployment read, a state write, the restart) half as long.
func (h *harness) slowAPI(took time.Duration) {
	h.obs.took, h.obs.apiTook, h.store.saveTook, h.restarter.took = took, took/2, took/2, took/2
}

// runner is a pass's Runner over the harness's fakes.
func (h *harness) runner() *check.Runner {
	return &check.Runner{Options: h.opts, Observer: h.obs, Store: h.store, Restarter: h.restarter,
		Events: h.events, Sinks: []alert.Sink{h.sink}, Clock: h.clk, Log: zerolog.New(h.logs)}
}

// pass runs one pass with the harness's deadline.
func (h *harness) pass() (*check.Report, error) {
	ctx, cancel := context.WithDeadline(context.Background(), h.clk.Now().Add(h.timeout))
	defer cancel()
	return h.runner().Run(ctx)
}

// wedgedAndDue leaves a weak wedge first seen at t0 and five minutes later, past
// --wedged-for: the next pass restarts.
func (h *harness) wedgedAndDue() {
	h.t.Helper()
	rep, err := h.pass()
	if err != nil || rep.Verdict != state.VerdictWedged || rep.Action != state.ActionWait {
		h.t.Fatalf("first sight: %s/%s %v", rep.Verdict, rep.Action, err)
	}
	h.clk.Step(5 * time.Minute)
}

func (h *harness) restarts() int { return h.calls.count("restart " + podName) }

func contains(list []string, s string) bool {
	for _, l := range list {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

func errWhat(err error) string {
	var e *check.Error
	if errors.As(err, &e) {
		return e.Step.What
	}
	return ""
}
