package integration

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
)

// Observations that are slow or fail, on the real API server (issue 17, items 1
// and 2): the API requests go through the fault-injecting proxy, the scrapes to
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

// A weak wedge is restarted by the first run that sees it whether each
// observation takes 0 or 5 s: the pod and EndpointSlice lists are held that long
// by the proxy, every other API request half as long.
func TestSlowAPIStillRestartsInTheFirstRun(t *testing.T) {
	for _, took := range []time.Duration{0, 2500 * time.Millisecond, 5 * time.Second} {
		t.Run(took.String(), func(t *testing.T) {
			s := newSimScenario(t)
			proxy := s.proxied(t)
			list, other := s.sim.Real(took), s.sim.Real(took/2)
			proxy.SetFault(func(r *http.Request) *testenv.Fault {
				if listsOf(r, "pods") || listsOf(r, "endpointslices") {
					return &testenv.Fault{Delay: list}
				}
				return &testenv.Fault{Delay: other}
			})
			h := s.cronEpisode(t, testenv.Unreachable, 3)
			t.Logf("observations of %s, nodes unreachable (weak evidence): %s", took, h)
			if !h.restarted || h.runs != 1 {
				t.Fatalf("observations of %s: want a restart by the first run that sees the wedge, got %s:\n%s", took, h, strings.Join(h.log, "\n"))
			}
		})
	}
}

// With a fifth of the scrapes failing (seeded) and one pod list of each run's
// confirmation refused, a strong wedge is paged by the first run that sees it and
// restarted within two runs.
func TestFailingSamplesStillPageAndRestart(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			s := newSimScenario(t)
			proxy := s.proxied(t)
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(seed, 17))
			failing := false
			s.metrics.SetHandler(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				fail := failing && rng.Float64() < 0.2
				mu.Unlock()
				if fail {
					http.Error(w, "injected scrape failure", http.StatusServiceUnavailable)
					return
				}
				s.sim.ServeHTTP(w, r)
			})
			lists := 0
			s.beforeRun = func() {
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
				if lists++; lists == 3 {
					return &testenv.Fault{Status: http.StatusServiceUnavailable}
				}
				return nil
			})
			h := s.cronEpisode(t, testenv.DeadRolled, 4)
			t.Logf("seed %d, 20%% scrape failures and a refused pod list per run, discovery dead: %s; paged in run %d", seed, h, h.pagedRun)
			if !h.restarted || h.runs > 2 || h.pagedRun != 1 {
				t.Fatalf("want wedged paged in run 1 and a restart by run 2, got %s, paged in run %d:\n%s", h, h.pagedRun, strings.Join(h.log, "\n"))
			}
		})
	}
}
