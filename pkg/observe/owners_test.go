package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/agentenv/watchdog/internal/podtest"
	"github.com/agentenv/watchdog/pkg/decide"
	"github.com/agentenv/watchdog/pkg/kube"
	"github.com/agentenv/watchdog/pkg/scrape"
)

func TestVerifyChain(t *testing.T) {
	yes := true
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler", UID: "dep-uid"}}
	rs := func(kind, apiVersion, name, uid string) *appsv1.ReplicaSet {
		r := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler-7d9c4", UID: "rs-uid"}}
		if kind != "" {
			r.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: &yes}}
		}
		return r
	}
	pod := podtest.Pod("agentenv-scheduler-7d9c4-abcde", time.Time{}, podtest.UID("pod-uid"))
	forged := pod
	forged.ControllerUID = "forged-uid"
	notController := rs("Deployment", "apps/v1", "agentenv-scheduler", "dep-uid")
	notController.OwnerReferences[0].Controller = nil

	for _, tc := range []struct {
		name string
		pod  decide.Pod
		rs   *appsv1.ReplicaSet
		ok   bool
		want string
	}{
		{"genuine", pod, rs("Deployment", "apps/v1", "agentenv-scheduler", "dep-uid"), true, "→ Deployment agentenv-scheduler (uid dep-uid)"},
		{"pod names the ReplicaSet with a wrong UID", forged, rs("Deployment", "apps/v1", "agentenv-scheduler", "dep-uid"), false, `names ReplicaSet agentenv-scheduler-7d9c4 with uid "forged-uid", but ReplicaSet agentenv-scheduler-7d9c4 has uid "rs-uid"`},
		{"ReplicaSet names the Deployment with a wrong UID", pod, rs("Deployment", "apps/v1", "agentenv-scheduler", "old-dep-uid"), false, `names Deployment agentenv-scheduler with uid "old-dep-uid", but Deployment agentenv-scheduler has uid "dep-uid"`},
		{"ReplicaSet of another Deployment", pod, rs("Deployment", "apps/v1", "agentenv-scheduler-canary", "dep-uid"), false, `controlled by Deployment "agentenv-scheduler-canary", not "agentenv-scheduler"`},
		{"ReplicaSet without a controller", pod, rs("", "", "", ""), false, "has no controller"},
		{"owner that is not the controller", pod, notController, false, "has no controller"},
		{"ReplicaSet controlled by something else", pod, rs("Rollout", "argoproj.io/v1alpha1", "agentenv-scheduler", "dep-uid"), false, "not by a Deployment"},
		{"a Deployment kind of another group", pod, rs("Deployment", "example.com/v1", "agentenv-scheduler", "dep-uid"), false, "not by a Deployment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := VerifyChain(tc.pod, tc.rs, dep)
			if got.Verified != tc.ok || !strings.Contains(got.Detail, tc.want) || (tc.ok && got.ReplicaSetUID != "rs-uid") {
				t.Errorf("got %+v, want verified=%v with %q", got, tc.ok, tc.want)
			}
		})
	}
}

// fakeAPI serves the two lists Observe makes, as JSON, from a loopback server;
// other requests go to more (nil: not found).
func fakeAPI(t *testing.T, pods []corev1.Pod, more http.HandlerFunc) *kube.Client {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/pods"):
			_ = json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: pods})
		case strings.HasSuffix(r.URL.Path, "/endpointslices"):
			_ = json.NewEncoder(w).Encode(&discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"}})
		case more != nil:
			more(w, r)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := kube.New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func runningPods(n int) []corev1.Pod {
	var pods []corev1.Pod
	for i := range n {
		pods = append(pods, corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sched-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1"},
		})
	}
	return pods
}

// gatedMetrics holds every scrape until want are in flight at once (or the
// scrape times out), and records the most seen in flight.
type gatedMetrics struct {
	mu       sync.Mutex
	want     int
	inflight int
	most     int
	hits     int
	open     chan struct{}
	opened   bool
}

func (g *gatedMetrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	g.inflight++
	g.hits++
	g.most = max(g.most, g.inflight)
	if g.inflight == g.want && !g.opened {
		g.opened = true
		close(g.open)
	}
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-r.Context().Done():
	}
	g.mu.Lock()
	if !g.opened { // a held scrape timed out: let the rest through
		g.opened = true
		close(g.open)
	}
	g.inflight--
	g.mu.Unlock()
	_, _ = w.Write([]byte("# empty\n"))
}

// newObserver scrapes the pods (at 127.0.0.1) on metricsURL's port.
func newObserver(t *testing.T, pods []corev1.Pod, metricsURL string) *Observer {
	c := fakeAPI(t, pods, nil)
	u, err := url.Parse(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	return &Observer{
		Client: c, Namespace: "ns", Selector: "app=sched", Container: "scheduler",
		Endpoints:   EndpointLister{Client: c, Namespace: "ns", Service: "nodes", Port: 8000},
		Scraper:     scrape.NewScraper(2*time.Second, 1<<20),
		MetricsPort: port, MetricsPath: "/metrics", Via: scrape.ViaDirect,
		Clock: clocktesting.NewFakePassiveClock(time.Now()),
	}
}

// TestScrapesAreBounded: with more pods than MaxScrapes, never more than
// MaxScrapes scrapes are in flight. The server holds each scrape until one more
// than the bound is in flight: without the bound all arrive at once and it sees
// them; with it, the held scrapes end at their timeout and the rest follow.
func TestScrapesAreBounded(t *testing.T) {
	for _, bound := range []int{-1, 0, 1, 2} { // zero or less: DefaultMaxScrapes
		want := bound
		if want <= 0 {
			want = DefaultMaxScrapes
		}
		g := &gatedMetrics{want: want + 1, open: make(chan struct{})}
		srv := httptest.NewServer(g)
		o := newObserver(t, runningPods(want+1), srv.URL)
		o.MaxScrapes = bound
		obs, err := o.Observe(context.Background())
		srv.Close()
		if err != nil {
			t.Fatal(err)
		}
		g.mu.Lock()
		if g.most > want || g.hits != want+1 {
			t.Errorf("MaxScrapes %d: %d scrapes in flight at once (bound %d), %d scrapes of %d pods", bound, g.most, want, g.hits, len(obs.Pods))
		}
		g.mu.Unlock()
	}
}

// TestTooManyPodsAreNotScraped: past MaxPods live pods, nothing is scraped.
func TestTooManyPodsAreNotScraped(t *testing.T) {
	for _, tc := range []struct {
		pods, max, hits int
	}{{pods: 4, max: 3, hits: 0}, {pods: 3, max: 3, hits: 3}, {pods: 4, max: 0, hits: 4}} {
		g := &gatedMetrics{want: 1, open: make(chan struct{})}
		srv := httptest.NewServer(g)
		pods := runningPods(tc.pods)
		// A terminating pod does not count against the limit.
		gone := runningPods(1)[0]
		gone.Name, gone.UID, gone.DeletionTimestamp = "sched-old", "uid-old", &metav1.Time{Time: time.Now()}
		o := newObserver(t, append(pods, gone), srv.URL)
		o.Reads.MaxPods = tc.max
		if _, err := o.Observe(context.Background()); err != nil {
			t.Fatal(err)
		}
		srv.Close()
		if g.hits != tc.hits {
			t.Errorf("%d live pods, MaxPods %d: %d scrapes, want %d", tc.pods, tc.max, g.hits, tc.hits)
		}
	}
}

// ownedPods are the pods of TestOnlyTheDeploymentsPodsAreRead: one of the
// scheduler Deployment (through its ReplicaSet, by UID), canaries of another
// Deployment with the same labels, bare debug pods, and pods naming ReplicaSets
// of the Deployment that do not exist (fake hashes).
func ownedPods(canaries, debug, fake int) []corev1.Pod {
	yes := true
	owned := func(name, rs, uid string) corev1.Pod {
		p := runningPods(1)[0]
		p.Name, p.UID = name, types.UID("uid-"+name)
		if rs != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs, UID: types.UID(uid), Controller: &yes}}
		}
		return p
	}
	pods := []corev1.Pod{owned("agentenv-scheduler-7d9c4-x2k8p", "agentenv-scheduler-7d9c4", "rs-uid")}
	for i := range canaries {
		pods = append(pods, owned(fmt.Sprintf("agentenv-scheduler-canary-5d8f9-%d", i), "agentenv-scheduler-canary-5d8f9", "rs-canary"))
	}
	for i := range debug {
		pods = append(pods, owned(fmt.Sprintf("debug-%d", i), "", ""))
	}
	for i := range fake {
		pods = append(pods, owned(fmt.Sprintf("agentenv-scheduler-fake%d-x", i), fmt.Sprintf("agentenv-scheduler-fake%d", i), "rs-fake"))
	}
	return pods
}

// TestOnlyTheDeploymentsPodsAreRead: with JudgeDeployment an
// observation reads the Deployment and the ReplicaSet the Deployment's pods
// name, once; a canary of another Deployment or a bare pod with the scheduler's
// labels costs no read, is not scraped and does not count for --max-pods. More
// ReplicaSet names of the Deployment than --max-pods are not read at all.
func TestOnlyTheDeploymentsPodsAreRead(t *testing.T) {
	yes := true
	dep := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{Kind: "Deployment", APIVersion: "apps/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler", Namespace: "ns", UID: "dep-uid"}}
	rs := &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{Kind: "ReplicaSet", APIVersion: "apps/v1"}, ObjectMeta: metav1.ObjectMeta{Name: "agentenv-scheduler-7d9c4", Namespace: "ns", UID: "rs-uid",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "agentenv-scheduler", UID: "dep-uid", Controller: &yes}}}}
	for _, tc := range []struct {
		name                       string
		canaries, debug, fake, max int
		// reads: the ReplicaSets read; scrapes; owned: whether the genuine pod is the Deployment's.
		reads, scrapes int
		owned          bool
	}{
		{name: "a canary and a debug pod", canaries: 1, debug: 1, max: 10, reads: 1, scrapes: 1, owned: true},
		{name: "many others, fewer than them allowed", canaries: 5, debug: 5, max: 2, reads: 1, scrapes: 1, owned: true},
		{name: "pods naming ReplicaSets that do not exist", fake: 1, max: 10, reads: 2, scrapes: 1, owned: true},
		{name: "more ReplicaSet names than --max-pods", fake: 2, max: 2, reads: 0, scrapes: 0, owned: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var reads []string
			deployments := 0
			c := fakeAPI(t, ownedPods(tc.canaries, tc.debug, tc.fake), func(w http.ResponseWriter, r *http.Request) {
				switch {
				case strings.HasSuffix(r.URL.Path, "/deployments/agentenv-scheduler"):
					mu.Lock()
					deployments++
					mu.Unlock()
					_ = json.NewEncoder(w).Encode(dep)
				case strings.Contains(r.URL.Path, "/replicasets/"):
					mu.Lock()
					reads = append(reads, r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:])
					mu.Unlock()
					if strings.HasSuffix(r.URL.Path, "/"+rs.Name) {
						_ = json.NewEncoder(w).Encode(rs)
						return
					}
					w.WriteHeader(http.StatusNotFound)
					_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound})
				default:
					http.NotFound(w, r)
				}
			})
			g := &gatedMetrics{want: 1, open: make(chan struct{})}
			metrics := httptest.NewServer(g)
			defer metrics.Close()
			o := newObserver(t, nil, metrics.URL)
			o.Client, o.Endpoints.Client = c, c
			o.Deployment, o.Reads.JudgePods, o.Reads.MaxPods = "agentenv-scheduler", decide.JudgeDeployment, tc.max
			obs, err := o.Observe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if obs.Ownership == nil || !obs.Ownership.Found || obs.Ownership.Err != nil {
				t.Fatalf("ownership %+v", obs.Ownership)
			}
			if got := obs.Ownership.Owns(obs.Pods[0]); got != tc.owned {
				t.Errorf("the Deployment's pod owned: %v, want %v (%+v)", got, tc.owned, obs.Ownership.Chains)
			}
			for _, p := range obs.Pods[1:] {
				if obs.Ownership.Owns(p) {
					t.Errorf("pod %s counted as the Deployment's", p.Name)
				}
			}
			g.mu.Lock()
			if len(reads) != tc.reads || g.hits != tc.scrapes {
				t.Errorf("ReplicaSets read %q, %d scrapes; want %d reads, %d scrapes", reads, g.hits, tc.reads, tc.scrapes)
			}
			g.mu.Unlock()

			// The next samples of the run reuse what was read, for ownersTTL;
			// a failed read (NotFound) is read again. The rollout gate's last look
			// before acting reads afresh.
			clk := o.Clock.(*clocktesting.FakePassiveClock)
			count := func() int { mu.Lock(); defer mu.Unlock(); return len(reads) }
			notFound := tc.reads - min(tc.reads, 1) // the fake ReplicaSets
			clk.SetTime(clk.Now().Add(ownersTTL - time.Second))
			if _, err := o.Observe(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := count(); got != 2*tc.reads-min(tc.reads, 1) {
				t.Errorf("a second sample within %s read %d ReplicaSets in all, want %d (the %d not found again)", ownersTTL, got, 2*tc.reads-min(tc.reads, 1), notFound)
			}
			before := count()
			clk.SetTime(clk.Now().Add(2 * time.Second))
			if _, err := o.Observe(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := count() - before; got != tc.reads {
				t.Errorf("a sample past %s read %d ReplicaSets, want %d", ownersTTL, got, tc.reads)
			}
			mu.Lock()
			if deployments != 2 {
				t.Errorf("three samples over %s read the Deployment %d times, want 2", ownersTTL+time.Second, deployments)
			}
			mu.Unlock()
			if tc.owned {
				before = count()
				o.Reads.Rollout = true
				if r := o.Rollout(context.Background(), obs.Pods[0]); !r.Owners[obs.Pods[0].UID].Verified || count()-before != 1 {
					t.Errorf("the rollout gate's read: %+v, %d reads, want a fresh one", r.Owners, count()-before)
				}
			}
		})
	}
}

// An EndpointSlice list that never ends (a continue token on every page) is read
// up to a bound, not until the pass's deadline, keeping every page.
func TestEndpointSlicePagesAreBounded(t *testing.T) {
	var pages, unpaged atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := pages.Add(1)
		if r.URL.Query().Get("limit") != "50" {
			unpaged.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&discoveryv1.EndpointSliceList{TypeMeta: metav1.TypeMeta{Kind: "EndpointSliceList", APIVersion: "discovery.k8s.io/v1"},
			ListMeta: metav1.ListMeta{Continue: fmt.Sprintf("page-%d", n)}, Items: make([]discoveryv1.EndpointSlice, 10)})
	}))
	defer srv.Close()
	c, err := kube.New(&rest.Config{Host: srv.URL, QPS: -1}) // no client-side rate limit
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = EndpointLister{Client: c, Namespace: "ns", Service: "nodes", Port: 8000}.Read(ctx, true)
	if err == nil || !strings.Contains(err.Error(), "pages") || pages.Load() > 100 {
		t.Errorf("%d pages read, %v: want an error naming the bound", pages.Load(), err)
	}
	if unpaged.Load() > 0 {
		t.Errorf("%d of %d lists without limit=50", unpaged.Load(), pages.Load())
	}
}
