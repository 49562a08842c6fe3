package doctor

import (
	"slices"
	"testing"
)

func accessStrings(n Needs) []string {
	var out []string
	for _, a := range n.Required() {
		out = append(out, a.String())
	}
	return out
}

// The chart's Role for each configuration is compared in test/chart; here, what
// only a missing object adds: create, which RBAC cannot narrow by name.
func TestRequiredCreatesOnlyWhatIsMissing(t *testing.T) {
	base := Needs{StateConfigMap: "st", Deployment: "sched", RestartMethod: "delete", MaxRestarts: 3, ElectionLease: "el"}
	want := []string{
		"list pods", "delete pods", "list endpointslices.discovery.k8s.io", "get configmaps/st", "update configmaps/st",
		"create events", "get deployments.apps/sched", "get leases.coordination.k8s.io/el", "update leases.coordination.k8s.io/el",
	}
	if got := accessStrings(base); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	missing := base
	missing.StateMissing, missing.ElectionLeaseMissing = true, true
	got := accessStrings(missing)
	for _, w := range []string{"create configmaps", "create leases.coordination.k8s.io"} {
		if !slices.Contains(got, w) {
			t.Errorf("missing objects: %q lacks %q", got, w)
		}
	}
	if len(got) != len(want)+2 {
		t.Errorf("missing objects: %q", got)
	}
}

// The rollout method reads the ReplicaSet of each pod it would restart (the owner
// chain, by UID); the delete method does not.
func TestRolloutNeedsReplicaSets(t *testing.T) {
	for _, method := range []string{"delete", "rollout"} {
		for _, max := range []int{0, 3} {
			got := accessStrings(Needs{StateConfigMap: "st", Deployment: "sched", RestartMethod: method, MaxRestarts: max})
			if has := slices.Contains(got, "get replicasets.apps"); has != (method == "rollout") {
				t.Errorf("%s, --max-restarts %d: get replicasets.apps required %v: %q", method, max, has, got)
			}
		}
	}
}
