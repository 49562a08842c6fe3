package doctor

import (
	"slices"
	"testing"

	"github.com/agentenv/watchdog/pkg/decide"
)

func accessStrings(n Needs) []string {
	var out []string
	for _, a := range n.Required() {
		out = append(out, a.String())
	}
	return out
}

// The chart's Role for each configuration is compared in test/chart; here, the
// watchdog's own objects: it creates them (create, which RBAC cannot
// narrow by name) and holds its pass Lease by name; an election under the same
// Lease adds nothing, under another its get and update.
func TestRequiredCreatesTheWatchdogsObjects(t *testing.T) {
	base := Needs{StateConfigMap: "st", Deployment: "sched", RestartMethod: "delete", MaxRestarts: 3, Lease: "pl", KeySecret: "k", ElectionLease: "pl"}
	want := []string{
		"list pods", "delete pods", "list endpointslices.discovery.k8s.io", "get configmaps/st", "update configmaps/st",
		"create configmaps", "create secrets", "get secrets/k", "create leases.coordination.k8s.io", "get leases.coordination.k8s.io/pl",
		"update leases.coordination.k8s.io/pl", "create events", "get deployments.apps/sched",
	}
	if got := accessStrings(base); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	other := base
	other.ElectionLease = "el"
	if got := accessStrings(other); len(got) != len(want)+2 || !slices.Contains(got, "update leases.coordination.k8s.io/el") {
		t.Errorf("election under another Lease: %q", got)
	}
}

// Judging only the Deployment's pods (--judge-pods deployment, the default)
// reads the ReplicaSet of each pod naming one of the Deployment's, and so does the
// rollout method before a restart (the owner chain, by UID); the delete method
// judging every pod reads none.
func TestReplicaSetsAreReadForOwnerChains(t *testing.T) {
	for _, judge := range []decide.JudgePods{decide.JudgeDeployment, decide.JudgeSelector} {
		for _, method := range []string{"delete", "rollout"} {
			for _, max := range []int{0, 3} {
				got := accessStrings(Needs{StateConfigMap: "st", Deployment: "sched", RestartMethod: method, JudgePods: judge, MaxRestarts: max})
				n := 0
				for _, a := range got {
					if a == "get replicasets.apps" {
						n++
					}
				}
				if want := judge == decide.JudgeDeployment || method == "rollout"; (n == 1) != want || n > 1 {
					t.Errorf("--judge-pods %s, %s, --max-restarts %d: get replicasets.apps required %d times, want it %v: %q", judge, method, max, n, want, got)
				}
			}
		}
	}
}
