package integration

import (
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/agentenv/watchdog/internal/testenv"
)

// TestKubectlHabits, on the real API server: without -n the namespace is the
// kubeconfig context's ($KUBECONFIG read as kubectl reads it); --as impersonates;
// status in a namespace without the watchdog's state is an error that says where
// the state is; -o yaml prints the JSON's document.
func TestKubectlHabits(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	s.check().expect(t, 0, "healthy", "none") // writes the state

	// A kubeconfig whose context names the scenario's namespace, through $KUBECONFIG.
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	must(t, err)
	cfg.Contexts[cfg.CurrentContext].Namespace = s.ns
	path := filepath.Join(t.TempDir(), "config")
	must(t, clientcmd.WriteToFile(*cfg, path))
	t.Setenv("KUBECONFIG", path)
	st := runCLI(t, "status")
	if st.code != 0 || !strings.Contains(st.stdout, "state: "+s.ns+"/agentenv-scheduler-watchdog") {
		t.Errorf("status without -n: exit %d\n%s%s", st.code, st.stdout, st.stderr)
	}
	y := runCLI(t, "status", "-o", "yaml")
	if y.code != 0 || !strings.Contains(y.stdout, "configMap: "+s.ns+"/agentenv-scheduler-watchdog") {
		t.Errorf("status -o yaml: exit %d\n%s%s", y.code, y.stdout, y.stderr)
	}

	// --as: the API server answers as that identity.
	nobody := "system:serviceaccount:" + s.ns + ":nobody"
	as := runCLI(t, "status", "--as", nobody)
	if as.code != 1 || !strings.Contains(as.stderr, `"`+nobody+`" cannot get resource "configmaps"`) {
		t.Errorf("status --as %s: exit %d\n%s", nobody, as.code, as.stderr)
	}

	// Another namespace: no state there, and status says where it is.
	ctx, cancel := testenv.Ctx()
	defer cancel()
	empty, err := env.CreateNamespace(ctx, "wd-empty")
	must(t, err)
	none := runCLI(t, "status", "-n", empty)
	if none.code != 1 || !strings.Contains(none.stderr, "no watchdog state in namespace "+empty) || !strings.Contains(none.stderr, s.ns) {
		t.Errorf("status in a namespace without state: exit %d\n%s%s", none.code, none.stdout, none.stderr)
	}
}

// TestStatusAndHistoryReadTheStateAlike, on the real API server: history reads
// the state as status does. In a namespace without the watchdog's state both are
// an error that says where the state is, not an empty history; over an
// unreadable state document both say so (status a warning, history a note)
// rather than show nothing.
func TestStatusAndHistoryReadTheStateAlike(t *testing.T) {
	s := newScenario(t, layout{serving: 3, page: fixture(t, "scheduler-metrics-healthy.txt")})
	s.check().expect(t, 0, "healthy", "none") // writes the state
	ctx, cancel := testenv.Ctx()
	defer cancel()
	empty, err := env.CreateNamespace(ctx, "wd-empty")
	must(t, err)
	for _, cmd := range []string{"status", "history"} {
		r := runCLI(t, cmd, "--kubeconfig", env.Kubeconfig, "-n", empty)
		if r.code != 1 || !strings.Contains(r.stderr, "no watchdog state in namespace "+empty) || !strings.Contains(r.stderr, s.ns) {
			t.Errorf("%s in a namespace without state: exit %d\n%s%s", cmd, r.code, r.stdout, r.stderr)
		}
	}

	corrupt, err := env.CreateNamespace(ctx, "wd-corrupt")
	must(t, err)
	writeStateRaw(t, ctx, corrupt, `{"version": 1, "pods": {"x": `)
	base := []string{"--kubeconfig", env.Kubeconfig, "-n", corrupt}
	want := "state in ConfigMap " + corrupt + "/agentenv-scheduler-watchdog key state.json is unreadable"
	for args, prefix := range map[string]string{"status": "warning: ", "history": "note: ", "history -o json": `"notes":["`} {
		r := runCLI(t, append(strings.Fields(args), base...)...)
		if r.code != 0 || !strings.Contains(r.stdout, prefix+want) {
			t.Errorf("%s over an unreadable state: exit %d, want %q\n%s%s", args, r.code, prefix+want, r.stdout, r.stderr)
		}
	}
}
