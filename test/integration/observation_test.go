package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/autoclock"
	"github.com/agentenv/watchdog/internal/schedsim"
	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/cli"
	"github.com/agentenv/watchdog/pkg/state"
)

// Observations that are slow or fail, on the real API server: the API requests go through the fault-injecting proxy, the scrapes to
// the simulated scheduler. Times are scheduler time (the clock is compressed 30×).

// proxied routes the scenario's API requests through a fault-injecting proxy.
func (s *scenario) proxied(t *testing.T) *testenv.Proxy {
	t.Helper()
	proxy, err := env.NewProxy()
	must(t, err)
	t.Cleanup(proxy.Close)
	kubeconfig, err := proxy.Kubeconfig(t.TempDir())
	must(t, err)
	s.base[1] = kubeconfig
	return proxy
}

func listsOf(r *http.Request, resource string) bool {
	return r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/"+resource)
}

// virtualClock is the clock a check runs on in these tests (cli.WithClock): time
// passes only when the pass waits for its next sample (at once, the clock moved
// on by the wait) and when the proxy holds a request (holdFor), never with the
// machine's load. The scheduler's metrics follow it too (schedsim.NewSimOn).
type virtualClock struct {
	*autoclock.Clock
	mu sync.Mutex
}

// newVirtualClock starts at a whole minute not before now, as a */5 schedule's
// times are: a deadline on it is never in the real past, so the pass's context
// expires only on the virtual clock.
func newVirtualClock() *virtualClock {
	return &virtualClock{Clock: autoclock.New(time.Now().Add(time.Minute).Truncate(time.Minute))}
}

// holdFor is a proxy fault that holds a request for d of virtual time from its
// arrival: the clock moves on to then, if it is not past it already.
func (c *virtualClock) holdFor(d time.Duration) *testenv.Fault {
	arrived := c.Now()
	return &testenv.Fault{Before: func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if at := arrived.Add(d); at.After(c.Now()) {
			c.SetTime(at)
		}
	}}
}

// virtualScenario is a scenario whose `watchdog check` runs on a virtual clock
// with the production defaults, its metrics from a simulated scheduler on the same
// clock, whose gauges refresh 1 ms after each whole minute (when */5 runs look):
// at their worst for a run.
type virtualScenario struct {
	*scenario
	clk *virtualClock
	ctx context.Context
	sim *schedsim.Sim
	// beforeRun, when set, runs before each run of cronEpisode.
	beforeRun func()
}

func newVirtualScenario(t testing.TB) *virtualScenario {
	t.Helper()
	s := newScenario(t, layout{serving: 3})
	s.base = s.base[:10:10] // the cluster's and the output's flags only: the production defaults
	clk := newVirtualClock()
	clk.SetTime(clk.Now().Add(time.Millisecond))
	v := &virtualScenario{scenario: s, clk: clk, ctx: cli.WithClock(context.Background(), clk), sim: schedsim.NewSimOn(3, 1, clk.Now)}
	s.metrics.SetHandler(v.sim.ServeHTTP)
	return v
}

// check runs `watchdog check` on the virtual clock.
func (v *virtualScenario) check(args ...string) result {
	v.t.Helper()
	v.syncCache()
	return runCLIContext(v.ctx, v.t, append(append([]string{"check"}, v.base...), args...)...)
}

// A weak wedge is restarted by the first run that sees it however long each
// observation takes, 0 to 5 s, with the production defaults,
// on the real API server through the proxy: the pod list of each observation is
// held that long (the EndpointSlices are listed beside it, the scrape follows;
// the pod list stands for the whole observation: so do the reads from the watch
// cache that tell the Deployment's pods, beside it), every request a run makes in
// turn (the Deployment read before a restart, the state writes, the delete) half
// as long; and,
// jittered, each pod list for a seeded time in [took/2, took]. The run is on a
// virtual clock (cli.WithClock), so only those holds and the samples' cadence take
// time: the real time the API server, the proxy and the process take, which a
// 30x compressed clock magnified into seconds of the run's budget on a loaded
// machine, is not counted.
func TestSlowAPIStillRestartsInTheFirstRun(t *testing.T) {
	for took := time.Duration(0); took <= 5*time.Second; took += 500 * time.Millisecond {
		for _, jitter := range []bool{false, true} {
			if jitter && took == 0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/jitter=%t", took, jitter), func(t *testing.T) {
				v := newVirtualScenario(t)
				proxy, clk, sim := v.proxied(t), v.clk, v.sim
				var mu sync.Mutex
				rng := rand.New(rand.NewPCG(17, uint64(took)))
				proxy.SetFault(func(r *http.Request) *testenv.Fault {
					switch {
					case listsOf(r, "pods"):
						d := took
						if jitter {
							mu.Lock()
							d = took/2 + time.Duration(rng.Int64N(int64(took/2)+1))
							mu.Unlock()
						}
						return clk.holdFor(d)
					case r.Method != http.MethodGet && !strings.Contains(r.URL.Path, "/events"),
						r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/deployments/") && r.URL.Query().Get("resourceVersion") != "0":
						return clk.holdFor(took / 2)
					}
					// The EndpointSlices beside the pod list, and the state read
					// beside the first observation, add nothing; nor do Events.
					return nil
				})
				v.check().expect(t, 0, "healthy", "none") // stores the counters
				clk.SetTime(clk.Now().Add(time.Minute))
				cause := clk.Now()
				sim.Set(schedsim.Unreachable)
				runStart := cause.Add(4 * time.Minute) // the next */5 run: ready reads 0 by then
				clk.SetTime(runStart)
				r := v.check()
				ran := clk.Since(runStart)
				t.Logf("observations of %s (jitter %t), nodes unreachable (weak evidence): %s/%s after %d samples, %s into the run, %s from the cause: %s",
					took, jitter, r.report.Verdict, r.report.Action, r.report.Samples, ran, clk.Since(cause), r.report.Reason)
				if r.code != 0 || r.report.Action != state.ActionRestart || v.podExists(v.pod.Name) {
					t.Fatalf("observations of %s: want a restart by the first run that sees the wedge, got exit %d, %s/%s\n%s", took, r.code, r.report.Verdict, r.report.Action, r.stderr)
				}
				if ran > cli.DefaultTimeout {
					t.Errorf("the run took %s of the virtual clock, past its %s deadline", ran, cli.DefaultTimeout)
				}
			})
		}
	}
}

// With 0-30 % of the scrapes failing (seeded, 5 seeds a rate) and one pod list of
// each run's confirmation refused, a strong wedge (discovery dead) and a weak one
// (nodes unreachable) are paged by the first run that sees them and restarted
// within two runs (for the weak wedge, by the bridge over failed samples while
// neither heartbeat counter moves), on the real API server; on the
// virtual clock, so that the machine's load does not decide how many samples a
// run takes.
func TestFailingSamplesStillPageAndRestart(t *testing.T) {
	for _, phase := range []struct {
		name  string
		phase testenv.Phase
	}{{"strong", testenv.DeadRolled}, {"weak", testenv.Unreachable}} {
		for _, rate := range []float64{0, 0.1, 0.2, 0.3} {
			for seed := uint64(1); seed <= 5; seed++ {
				t.Run(fmt.Sprintf("%s/%.0f%%/seed %d", phase.name, rate*100, seed), func(t *testing.T) {
					v := newVirtualScenario(t)
					proxy := v.proxied(t)
					var mu sync.Mutex
					rng := rand.New(rand.NewPCG(seed, 17))
					failing := false
					v.metrics.SetHandler(func(w http.ResponseWriter, r *http.Request) {
						mu.Lock()
						fail := failing && rng.Float64() < rate
						mu.Unlock()
						if fail {
							http.Error(w, "injected scrape failure", http.StatusServiceUnavailable)
							return
						}
						v.sim.ServeHTTP(w, r)
					})
					lists := 0
					v.beforeRun = func() {
						mu.Lock()
						defer mu.Unlock()
						failing, lists = true, 0
					}
					proxy.SetFault(func(r *http.Request) *testenv.Fault {
						if !listsOf(r, "pods") {
							return nil
						}
						mu.Lock()
						defer mu.Unlock()
						// The third pod list of a run is its second confirmation sample.
						if lists++; lists == 3 && failing {
							return &testenv.Fault{Status: http.StatusServiceUnavailable}
						}
						return nil
					})
					h := v.cronEpisode(t, phase.phase, false, 4)
					t.Logf("%.0f%% scrape failures and a refused pod list per run, %s wedge: %s; paged in run %d", rate*100, phase.name, h, h.pagedRun)
					if !h.restarted || h.pagedRun != h.seenRun || h.runs-h.seenRun+1 > 2 {
						t.Fatalf("want wedged paged in the first run that sees it and a restart within two runs, got %s, seen in run %d, paged in run %d:\n%s", h, h.seenRun, h.pagedRun, strings.Join(h.log, "\n"))
					}
				})
			}
		}
	}
}
