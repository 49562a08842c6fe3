package doctor

import (
	"github.com/agentenv/watchdog/pkg/decide"
)

// Access is one API call a configured watchdog makes: a verb on a resource in the watched
// namespace, on one object (Name) or, where the API cannot check a name (list, create), on any.
type Access struct {
	Group       string `json:"group"`
	Resource    string `json:"resource"`
	Subresource string `json:"subresource,omitempty"` // "proxy" for pods/proxy
	Verb        string `json:"verb"`
	Name        string `json:"name,omitempty"`
	Why         string `json:"-"` // which part of the watchdog makes the call
}

// String reads like `kubectl auth can-i`: "delete pods", "get configmaps/state".
func (a Access) String() string {
	res := a.resource()
	if a.Group != "" {
		res += "." + a.Group
	}
	if a.Name != "" {
		res += "/" + a.Name
	}
	return a.Verb + " " + res
}

// resource is the resource with its subresource: "pods/proxy".
func (a Access) resource() string {
	if a.Subresource != "" {
		return a.Resource + "/" + a.Subresource
	}
	return a.Resource
}

// Needs are the inputs that decide which calls a watchdog makes.
type Needs struct {
	StateConfigMap, Deployment, RestartMethod string
	JudgePods                                 decide.JudgePods
	MaxRestarts                               int
	// LeaderLease is the scheduler's leader Lease (--leader-lease), ElectionLease
	// the watchdog's own (`run --leader-elect`); "" when not set.
	LeaderLease, ElectionLease string
	WatchEndpoints             bool // `run --watch-endpoints`
	// ScrapeViaAPIServer: --scrape-via apiserver, or auto where the runs are outside a pod.
	ScrapeViaAPIServer bool
	EvidenceConfigMap  string // --evidence-configmap
	EvidenceLogs       bool   // --evidence-logs
	Lease              string // the Lease each pass holds (--lease)
	Canary             string // the canary EndpointSlice (--discovery-probe canary), or ""
	KeySecret          string // --key-secret, or ""
}

// Required lists every call the configuration makes, in the order of the chart's Role
// (templates/role.yaml), which grants exactly these; create cannot be narrowed by name (the
// chart's guard admission policy does). --dry-run narrows nothing: turning it off needs no new rights.
func (n Needs) Required() []Access {
	restarts, election := n.MaxRestarts > 0, n.ElectionLease != "" && n.ElectionLease != n.Lease
	rollout, byDeployment := n.RestartMethod == decide.MethodRollout, n.JudgePods == decide.JudgeDeployment
	const apps, discovery, coordination = "apps", "discovery.k8s.io", "coordination.k8s.io"
	const elect = "the watchdog's own leader election (--leader-elect-lease)"
	var out []Access
	for _, c := range []struct {
		when bool
		Access
	}{
		{true, Access{Resource: "pods", Verb: "list", Why: "observe the scheduler pods (--scheduler-selector)"}},
		// Not in the chart's Role: in a pod, auto scrapes directly.
		{n.ScrapeViaAPIServer, Access{Resource: "pods", Subresource: "proxy", Verb: "get", Why: "scrape the scheduler's metrics through the API server's pod proxy (--scrape-via apiserver)"}},
		{restarts && n.RestartMethod == decide.MethodDelete, Access{Resource: "pods", Verb: "delete", Why: "restart a wedged scheduler (--restart-method delete)"}},
		{true, Access{Group: discovery, Resource: "endpointslices", Verb: "list", Why: "count the nodes discovery should see (--nodes-service)"}},
		{n.Canary != "", Access{Group: discovery, Resource: "endpointslices", Verb: "create", Why: "write the discovery probe's canary (--discovery-probe canary)"}},
		{n.Canary != "", Access{Group: discovery, Resource: "endpointslices", Verb: "get", Name: n.Canary, Why: "check the canary is still the one written"}},
		{n.Canary != "", Access{Group: discovery, Resource: "endpointslices", Verb: "delete", Name: n.Canary, Why: "remove the canary"}},
		{n.WatchEndpoints, Access{Group: discovery, Resource: "endpointslices", Verb: "watch", Why: "start a pass as soon as the nodes change (run --watch-endpoints; without it, passes keep the plain --interval)"}},
		{true, Access{Resource: "configmaps", Verb: "get", Name: n.StateConfigMap, Why: "read the state (--state-configmap)"}},
		{true, Access{Resource: "configmaps", Verb: "update", Name: n.StateConfigMap, Why: "write the state and claim restarts (--state-configmap)"}},
		// create is authorized without a name: RBAC cannot narrow it.
		{true, Access{Resource: "configmaps", Verb: "create", Why: "create the state and evidence ConfigMaps on the first run"}},
		{n.KeySecret != "", Access{Resource: "secrets", Verb: "create", Why: "create the key Secret at the first real pass (--key-secret)"}},
		{n.KeySecret != "", Access{Resource: "secrets", Verb: "get", Name: n.KeySecret, Why: "read the key that seals the state and the evidence (--key-secret)"}},
		{true, Access{Group: coordination, Resource: "leases", Verb: "create", Why: "create the pass Lease on the first run (--lease)"}},
		{true, Access{Group: coordination, Resource: "leases", Verb: "get", Name: n.Lease, Why: "hold the Lease while a pass runs (--lease)"}},
		{true, Access{Group: coordination, Resource: "leases", Verb: "update", Name: n.Lease, Why: "hold the Lease while a pass runs (--lease)"}},
		{n.EvidenceConfigMap != "", Access{Resource: "configmaps", Verb: "get", Name: n.EvidenceConfigMap, Why: "keep the evidence of restarts (--evidence-configmap)"}},
		{n.EvidenceConfigMap != "", Access{Resource: "configmaps", Verb: "update", Name: n.EvidenceConfigMap, Why: "keep the evidence of restarts (--evidence-configmap)"}},
		{n.EvidenceLogs, Access{Resource: "pods", Subresource: "log", Verb: "get", Why: "save the scheduler's last log lines before a restart (--evidence-logs)"}},
		{true, Access{Resource: "events", Verb: "create", Why: "leave an Event on each object judged or acted on"}},
		{true, Access{Group: apps, Resource: "deployments", Verb: "get", Name: n.Deployment, Why: "hold restarts while the scheduler rolls out (--deployment)"}},
		{restarts && rollout, Access{Group: apps, Resource: "deployments", Verb: "patch", Name: n.Deployment, Why: "restart a wedged scheduler (--restart-method rollout)"}},
		// ReplicaSet names change with every rollout: not narrowed by name.
		{byDeployment, Access{Group: apps, Resource: "replicasets", Verb: "get", Why: "judge only the Deployment's pods: pod → ReplicaSet → Deployment by UID (--judge-pods deployment)"}},
		{!byDeployment && rollout, Access{Group: apps, Resource: "replicasets", Verb: "get", Why: "check pod → ReplicaSet → Deployment by UID before a rollout restart (--restart-method rollout)"}},
		{n.LeaderLease != "", Access{Group: coordination, Resource: "leases", Verb: "get", Name: n.LeaderLease, Why: "judge only the scheduler's leader (--leader-lease)"}},
		{election, Access{Group: coordination, Resource: "leases", Verb: "get", Name: n.ElectionLease, Why: elect}},
		{election, Access{Group: coordination, Resource: "leases", Verb: "update", Name: n.ElectionLease, Why: elect}},
	} {
		if c.when {
			out = append(out, c.Access)
		}
	}
	return out
}
