package chart

// The release under test: its names (the same in every rendered and installed
// test), install, upgrade and uninstall, and a release installed beside a simulated
// scheduler with the watchdog ready to run as the chart's CronJob.

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/agentenv/watchdog/internal/testenv"
)

const (
	// release and fullname name the release in every test, rendered or installed.
	release  = "wd"
	fullname = "wd-agentenv-scheduler-watchdog"
	// renderNamespace is the namespace `helm template` renders into.
	renderNamespace = "agentenv-system"
	// stateName is the state ConfigMap the chart creates.
	stateName = "agentenv-scheduler-watchdog"
	// schedDep is the simulated scheduler's Deployment (scheduler.deployment's default).
	schedDep = "agentenv-scheduler"
	// hmacKey is the webhook key the installed releases put in their Secret.
	hmacKey = "chart-test-hmac-key-of-32-bytes-or-more"
	// wedgedFor is the --wedged-for of an installed release's runs.
	wedgedFor = 2 * time.Second
)

// releaseT is the chart installed in one namespace of the test API server.
type releaseT struct {
	t      *testing.T
	ns     string
	name   string
	values string // path of the values file
}

func installChart(t *testing.T, ns, name, values string, extra ...string) (*releaseT, string) {
	t.Helper()
	r := &releaseT{t: t, ns: ns, name: name, values: valuesFile(t, values)}
	out := mustHelm(t, append([]string{"install", name, chartDir, "--namespace", ns, "--kubeconfig", env.Kubeconfig, "-f", r.values}, extra...)...)
	return r, out
}

func (r *releaseT) upgrade(extra ...string) {
	r.t.Helper()
	mustHelm(r.t, append([]string{"upgrade", r.name, chartDir, "--namespace", r.ns, "--kubeconfig", env.Kubeconfig, "-f", r.values}, extra...)...)
}

func (r *releaseT) uninstall() {
	r.t.Helper()
	mustHelm(r.t, "uninstall", r.name, "--namespace", r.ns, "--kubeconfig", env.Kubeconfig)
}

// checkNotes: the commands the NOTES print, for this namespace.
func checkNotes(t *testing.T, notes, ns string) {
	t.Helper()
	for _, want := range []string{
		"kubectl -n " + ns + " logs job/$job",
		"--from=cronjob/" + fullname,
		"kubectl set env --local -f - WATCHDOG_DRY_RUN=true WATCHDOG_SHADOW=false",
		"helm test " + release + " -n " + ns + " --logs",
		"get configmap " + stateName + ` -o jsonpath='{.data.state\.json}'`,
		`"spec":{"suspend":true}`,
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("NOTES lack %q:\n%s", want, notes)
		}
	}
}

// installed is the chart installed (CronJob mode) in a namespace of its own, the
// simulated scheduler beside it, and the watchdog ready to run as the chart's
// ServiceAccount with the CronJob's environment, its webhook pointed at a loopback
// receiver. Each test makes its own: no test depends on another's leftovers.
type installed struct {
	*releaseT
	notes      string
	sched      *scheduler
	kubeconfig string
	// sa is a client with the chart's ServiceAccount's token.
	sa   kubernetes.Interface
	wd   *chartWatchdog
	recv *receiver
	// flags are the test-only flags of every run: where the simulated scheduler
	// listens, short clocks, and the loopback receiver.
	flags []string
}

// install installs the chart with restart.method method beside a scheduler serving
// page (a testdata/ fixture).
func install(t *testing.T, method, page string) *installed {
	t.Helper()
	return installWith(t, method, page, "")
}

// installWith is install with more values (YAML) after the test's own.
func installWith(t *testing.T, method, page, more string) *installed {
	t.Helper()
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-"+method)
	must(t, err)
	values := fmt.Sprintf("restart: {method: %s}\nalerts: {webhookURL: 'https://hooks.invalid/watchdog', webhookSecret: %s, clusterName: envtest}\n", method, hmacKey)
	in := &installed{}
	in.releaseT, in.notes = installChart(t, ns, release, values+more)
	in.sched = layOutScheduler(t, ns, fixture(t, page))
	in.kubeconfig, in.sa = saKubeconfig(t, ns, fullname)
	in.wd = cronJobWatchdog(t, ns, in.kubeconfig)
	in.recv = newReceiver(t, hmacKey)
	in.flags = []string{
		"--metrics-port", strconv.Itoa(in.sched.metrics.Port()),
		"--startup-grace", "1s", "--wedged-for", wedgedFor.String(), "--confirm-window", "0", "--scrape-timeout", "1s",
		// The chart's Secret holds an https URL; point the sink at the loopback
		// receiver. The HMAC key still comes from the chart's Secret.
		"--webhook-url", in.recv.URL,
	}
	return in
}
