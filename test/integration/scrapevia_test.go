package integration

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentenv/watchdog/internal/testenv"
	"github.com/agentenv/watchdog/pkg/doctor"
	"github.com/agentenv/watchdog/pkg/scrape"
)

// proxyScheduler is a scheduler pod whose metrics listen on a test host's
// non-loopback address (a network namespace of the test's own), so that the real
// API server's pod proxy can reach them. It records the requests it serves.
type proxyScheduler struct {
	ns      string
	metrics *testenv.MetricsServer
	mu      sync.Mutex
	seen    []http.Header
	delay   time.Duration
}

func newProxyScheduler(t *testing.T, host *testenv.NetnsHost) *proxyScheduler {
	t.Helper()
	l, err := host.Listen()
	must(t, err)
	page := testenv.Page(testenv.Values{Ready: 3, HeartbeatOK: 120})
	p := &proxyScheduler{metrics: testenv.NewMetricsServerOn(l, page)}
	t.Cleanup(p.metrics.Close)
	p.metrics.SetHandler(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.seen = append(p.seen, r.Header.Clone())
		delay := p.delay
		p.mu.Unlock()
		time.Sleep(delay)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		_, _ = w.Write([]byte(page))
	})
	ctx, cancel := testenv.Ctx()
	defer cancel()
	p.ns, err = env.CreateNamespace(ctx, "via")
	must(t, err)
	_, err = testenv.CreateDeployment(ctx, env.Client, p.ns, "agentenv-scheduler")
	must(t, err)
	must(t, testenv.CreateNodeSlices(ctx, env.Client, p.ns, "agentenv-nodes", 3, 100))
	_, err = testenv.CreateSchedulerPod(ctx, env.Client, p.ns, testenv.PodSpec{Name: "agentenv-scheduler-abc12", IP: host.PeerIP})
	must(t, err)
	return p
}

// requests returns the headers of the requests served since the last call.
func (p *proxyScheduler) requests() []http.Header {
	p.mu.Lock()
	defer p.mu.Unlock()
	seen := p.seen
	p.seen = nil
	return seen
}

func (p *proxyScheduler) args(cmd string, flags ...string) []string {
	return append([]string{cmd, "--kubeconfig", env.Kubeconfig, "--namespace", p.ns, "--output", "json",
		"--metrics-port", strconv.Itoa(p.metrics.Port()), "--startup-grace", "1s", "--scrape-timeout", "2s", "--timeout", "30s"}, flags...)
}

// proxied: the API server's proxy says who asked, in X-Forwarded-For; a direct
// scrape does not.
func proxied(h http.Header) bool { return h.Get("X-Forwarded-For") != "" }

// TestScrapeVia: --scrape-via on the real API server. apiserver (and auto outside a
// pod) reads the pod's metrics through GET pods/<pod>:<port>/proxy, direct (and auto
// in a pod) from the pod IP; the report and doctor say which. The stand-in listens
// in a network namespace of the test's own: the API server refuses to proxy to
// loopback, which the last case shows.
func TestScrapeVia(t *testing.T) {
	host, err := testenv.NewNetnsHost()
	if err != nil {
		t.Fatalf("%v (this test needs root: the API server proxies only to non-loopback pod IPs)", err)
	}
	t.Cleanup(func() {
		if err := host.Close(); err != nil {
			t.Error(err)
		}
	})
	sched := newProxyScheduler(t, host)
	syncCache(t, sched.ns)

	for _, c := range []struct {
		name  string
		flag  string
		inPod bool
		want  scrape.Via
		byAPI bool
	}{
		{"apiserver", "apiserver", false, scrape.ViaAPIServer, true},
		{"auto outside a pod", "auto", false, scrape.ViaAPIServer, true},
		{"direct", "direct", false, scrape.ViaDirect, false},
		{"auto in a pod", "auto", true, scrape.ViaDirect, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "")
			if c.inPod {
				t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1") // --kubeconfig still gives the credentials
			}
			sched.requests()
			r := runCLI(t, sched.args("check", "--dry-run", "--scrape-via", c.flag)...)
			r.expect(t, 0, "healthy", "none")
			if r.report.ScrapeVia != c.want {
				t.Errorf("report says scrapeVia %q, want %q", r.report.ScrapeVia, c.want)
			}
			seen := sched.requests()
			if len(seen) != 1 {
				t.Fatalf("the scheduler served %d requests, want 1", len(seen))
			}
			if proxied(seen[0]) != c.byAPI {
				t.Errorf("request came through the API server: %v, want %v (headers %v)", proxied(seen[0]), c.byAPI, seen[0])
			}
		})
	}

	t.Run("the same bounds through the proxy", func(t *testing.T) {
		r := runCLI(t, sched.args("check", "--dry-run", "--scrape-via", "apiserver", "--metrics-max-bytes", "1024")...)
		r.expect(t, 0, "unknown", "none")
		if k := r.report.Targets[0].ScrapeKind; k != string(scrape.KindTooLarge) {
			t.Errorf("a page over --metrics-max-bytes through the proxy: kind %q, want too-large (%s)", k, r.report.Targets[0].ScrapeError)
		}
		sched.mu.Lock()
		sched.delay = 3 * time.Second
		sched.mu.Unlock()
		defer func() { sched.mu.Lock(); sched.delay = 0; sched.mu.Unlock() }()
		start := time.Now()
		r = runCLI(t, sched.args("check", "--dry-run", "--scrape-via", "apiserver", "--scrape-timeout", "1s")...)
		r.expect(t, 0, "unknown", "none")
		if k := r.report.Targets[0].ScrapeKind; k != string(scrape.KindTimeout) {
			t.Errorf("a slow page through the proxy: kind %q, want timeout (%s)", k, r.report.Targets[0].ScrapeError)
		}
		if took := time.Since(start); took > 2900*time.Millisecond {
			t.Errorf("the run took %s: --scrape-timeout 1s did not cut the proxied scrape", took)
		}
	})

	t.Run("doctor says which path, and checks get pods/proxy", func(t *testing.T) {
		r := runCLI(t, sched.args("doctor", "--scrape-via", "apiserver")...)
		var rep doctor.Report
		must(t, json.Unmarshal([]byte(r.stdout), &rep))
		var proxyRBAC, metrics *doctor.Result
		for i, c := range rep.Checks {
			switch {
			case c.Name == "can get pods/proxy":
				proxyRBAC = &rep.Checks[i]
			case strings.HasPrefix(c.Name, "metrics of pod "):
				metrics = &rep.Checks[i]
			}
		}
		if proxyRBAC == nil || !proxyRBAC.OK {
			t.Errorf("doctor --scrape-via apiserver: check of get pods/proxy: %+v", proxyRBAC)
		}
		if metrics == nil || !metrics.OK || !strings.Contains(metrics.Detail, "through the API server's pod proxy") || !strings.Contains(metrics.Detail, "/proxy/metrics") {
			t.Errorf("doctor's metrics check does not say it went through the proxy: %+v", metrics)
		}
		r = runCLI(t, sched.args("doctor", "--scrape-via", "direct")...)
		if !strings.Contains(r.stdout, "directly from the pod IP") || strings.Contains(r.stdout, "pods/proxy") {
			t.Errorf("doctor --scrape-via direct:\n%s", r.stdout)
		}
	})

	// doctor --as the watchdog's ServiceAccount from outside a pod (the README's
	// check of the chart's rights): that identity's runs are in a pod, where auto
	// scrapes directly and needs no pods/proxy; doctor reaches the pod through the
	// proxy with the caller's own credentials, since the ServiceAccount may not.
	t.Run("as a ServiceAccount, auto checks the in-pod path's rights", func(t *testing.T) {
		t.Setenv("KUBERNETES_SERVICE_HOST", "")
		serviceAccountToken(t, sched.ns, "watchdog")
		grantWatchdog(t, sched.ns, "watchdog") // no pods/proxy, as the chart's Role
		as := "system:serviceaccount:" + sched.ns + ":watchdog"
		var rep doctor.Report
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			sched.requests()
			r := runCLI(t, sched.args("doctor", "--as", as, "--scrape-via", "auto")...)
			must(t, json.Unmarshal([]byte(r.stdout), &rep))
			// A new RoleBinding reaches the authorizer quickly, not instantly.
			if i := slices.IndexFunc(rep.Checks, func(c doctor.Result) bool { return c.Name == "can list pods" }); (i >= 0 && rep.Checks[i].OK) || time.Now().After(deadline) {
				break
			}
		}
		for _, c := range rep.Checks {
			if strings.Contains(c.Name, "pods/proxy") || (!c.OK && strings.Contains(c.Detail+c.Hint, "pods/proxy")) {
				t.Errorf("doctor --as %s checks pods/proxy, which its runs in a pod do not use: %+v", as, c)
			}
			if strings.HasPrefix(c.Name, "metrics of pod ") && (!c.OK || !strings.Contains(c.Detail, "through the API server's pod proxy")) {
				t.Errorf("metrics, with the caller's credentials through the proxy: %+v", c)
			}
		}
		if seen := sched.requests(); len(seen) != 1 || !proxied(seen[0]) {
			t.Errorf("the scheduler served %d request(s) (%v), want 1 through the API server", len(seen), seen)
		}
		// Its runs in a pod write the canary too (no probe from here): those rights are checked.
		r := runCLI(t, sched.args("doctor", "--as", as, "--discovery-probe", "canary", "--probe-address", "10.0.0.9")...)
		if !strings.Contains(r.stdout, `"can create endpointslices.discovery.k8s.io"`) || !strings.Contains(r.stdout, `"can delete endpointslices.discovery.k8s.io/agentenv-scheduler-watchdog-probe"`) {
			t.Errorf("doctor --as %s --discovery-probe canary does not check the canary's rights:\n%s", as, r.stdout)
		}
	})

	t.Run("without get pods/proxy the API server refuses, and says so", func(t *testing.T) {
		kubeconfig, err := env.WriteKubeconfig("via-nobody-"+sched.ns, serviceAccountToken(t, sched.ns, "nobody"))
		must(t, err)
		r := runCLI(t, "doctor", "--kubeconfig", kubeconfig, "--namespace", sched.ns, "--output", "json", "--scrape-via", "apiserver",
			"--metrics-port", strconv.Itoa(sched.metrics.Port()), "--timeout", "30s")
		if !strings.Contains(r.stdout, `"can get pods/proxy"`) || !strings.Contains(r.stdout, "forbidden") {
			t.Errorf("doctor as an identity without rights:\n%s", r.stdout)
		}
	})

	t.Run("loopback: the API server will not proxy, direct works", func(t *testing.T) {
		s := newScenario(t, layout{serving: 3, page: testenv.Page(testenv.Values{Ready: 3, HeartbeatOK: 10})})
		r := s.check("--dry-run", "--scrape-via", "apiserver")
		r.expect(t, 0, "unknown", "none")
		if e := r.report.Targets[0].ScrapeError; !strings.Contains(e, "address not allowed") {
			t.Errorf("a pod on 127.0.0.1 through the proxy: %q, want the API server's 'address not allowed'", e)
		}
		s.check("--dry-run", "--scrape-via", "direct").expect(t, 0, "healthy", "none")
	})
}

// syncCache waits until the API server's watch cache holds what the test wrote.
func syncCache(t *testing.T, ns string) {
	t.Helper()
	(&scenario{t: t, ns: ns}).syncCache()
}
