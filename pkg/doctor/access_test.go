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
