package chart

import (
	"strings"
	"testing"

	"github.com/agentenv/watchdog/internal/testenv"
)

// TestNotesTellTheTruth: what the NOTES say the install will do matches its mode:
// live restarts, shadow records would-restarts (and says how to spend the shadow
// week and leave it), dry run writes and sends nothing; each points at helm test.
func TestNotesTellTheTruth(t *testing.T) {
	ctx, cancel := testenv.Ctx()
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "chart-notes")
	must(t, err)
	for _, c := range []struct {
		name, values string
		want, not    []string
	}{
		{"live", "", []string{"(cronjob mode).", "It restarts a wedged one by deleting the observed pod", "which may restart"},
			[]string{"SHADOW MODE", "DRY RUN", "would-restart"}},
		{"live, rollout", "restart: {method: rollout}", []string{"It restarts a wedged one by a rollout restart of Deployment agentenv-scheduler"}, []string{"SHADOW MODE"}},
		{"alert only", "restart: {maxRestarts: 0}", []string{"It restarts nothing (restart.maxRestarts is 0: alert only)"}, []string{"It restarts a wedged one"}},
		{"shadow", "decision: {shadow: true}", []string{"(cronjob mode, SHADOW MODE).", "records a `would-restart` instead and restarts nothing",
			"Each day of the shadow week", "--since 24h", "--reset-then-reuse-values --set decision.shadow=false"},
			[]string{"It restarts a wedged one", "which may restart"}},
		{"dry run", "dryRun: true", []string{"(cronjob mode, DRY RUN).", "it restarts\nnothing, writes no state and sends no alert", "--set dryRun=false"},
			[]string{"It restarts a wedged one", "shadow week", "which may restart"}},
		{"deployment, shadow", "mode: deployment\ndecision: {shadow: true}", []string{"(deployment mode, SHADOW MODE).", "Each day of the shadow week"}, []string{"It restarts a wedged one"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := mustHelm(t, "install", release, chartDir, "--namespace", ns, "--kubeconfig", env.Kubeconfig, "--dry-run", "-f", valuesFile(t, c.values))
			_, notes, ok := strings.Cut(out, "\nNOTES:\n")
			if !ok {
				t.Fatalf("no NOTES in\n%s", out)
			}
			for _, w := range append(c.want, "helm test "+release+" -n "+ns+" --logs") {
				if !strings.Contains(notes, w) {
					t.Errorf("NOTES lack %q:\n%s", w, notes)
				}
			}
			for _, w := range c.not {
				if strings.Contains(notes, w) {
					t.Errorf("NOTES say %q:\n%s", w, notes)
				}
			}
		})
	}
}
