package doctor

import (
	"fmt"

	"github.com/agentenv/watchdog/pkg/decide"
)

// Access is one API call a configured watchdog makes: a verb on a resource in the
// watched namespace, on one object (Name) or, where the API cannot check a name
// (list, create, delete of pods whose names change), on any.
type Access struct {
	Group    string `json:"group"`
	Resource string `json:"resource"`
	// Subresource: "proxy" for pods/proxy.
	Subresource string `json:"subresource,omitempty"`
	Verb        string `json:"verb"`
	Name        string `json:"name,omitempty"`
	// Why says which part of the watchdog makes the call.
	Why string `json:"-"`
}

// String reads like `kubectl auth can-i`: "delete pods", "get configmaps/state".
func (a Access) String() string {
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	if a.Group != "" {
		res += "." + a.Group
	}
	if a.Name != "" {
		res += "/" + a.Name
	}
	return a.Verb + " " + res
}

// Needs are the inputs that decide which calls a watchdog makes.
type Needs struct {
	StateConfigMap string
	Deployment     string
	RestartMethod  string
	JudgePods      decide.JudgePods
	MaxRestarts    int
	// LeaderLease is the scheduler's leader Lease (--leader-lease), or "".
	LeaderLease string
	// ElectionLease is the watchdog's own election Lease (`run --leader-elect`), or "".
	ElectionLease string
	// WatchEndpoints: `run --watch-endpoints` watches the nodes' EndpointSlices.
	WatchEndpoints bool
	// ScrapeViaAPIServer: metrics are read through the API server's pod proxy
	// (--scrape-via apiserver, or auto outside a pod), which needs get pods/proxy.
	ScrapeViaAPIServer bool
	// EvidenceConfigMap keeps the evidence of restarts (--evidence-configmap);
	// EvidenceLogs reads the scheduler's log into it (--evidence-logs).
	EvidenceConfigMap string
	EvidenceLogs      bool
	// StateMissing and ElectionLeaseMissing: the object does not exist yet, so the
	// watchdog will create it (the chart creates both, and grants no create).
	StateMissing         bool
	ElectionLeaseMissing bool
}

// Required lists every call the configuration makes, in the order of the chart's
// Role (charts/agentenv-scheduler-watchdog/templates/role.yaml), which grants
// exactly these when the chart created the state ConfigMap and the election Lease.
// --dry-run narrows nothing, as in the chart: turning it off needs no new rights.
func (n Needs) Required() []Access {
	restarts := n.MaxRestarts > 0
	out := []Access{{Resource: "pods", Verb: "list", Why: "observe the scheduler pods (--scheduler-selector)"}}
	if n.ScrapeViaAPIServer {
		// Not in the chart's Role: in a pod, auto scrapes directly.
		out = append(out, Access{Resource: "pods", Subresource: "proxy", Verb: "get", Why: "scrape the scheduler's metrics through the API server's pod proxy (--scrape-via apiserver)"})
	}
	if restarts && n.RestartMethod == decide.MethodDelete {
		out = append(out, Access{Resource: "pods", Verb: "delete", Why: "restart a wedged scheduler (--restart-method delete)"})
	}
	out = append(out,
		Access{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "list", Why: "count the nodes discovery should see (--nodes-service)"},
	)
	if n.WatchEndpoints {
		out = append(out, Access{Group: "discovery.k8s.io", Resource: "endpointslices", Verb: "watch", Why: "start a pass as soon as the nodes change (run --watch-endpoints; without it, passes keep the plain --interval)"})
	}
	out = append(out,
		Access{Resource: "configmaps", Verb: "get", Name: n.StateConfigMap, Why: "read the state (--state-configmap)"},
		Access{Resource: "configmaps", Verb: "update", Name: n.StateConfigMap, Why: "write the state and claim restarts (--state-configmap)"},
	)
	if n.StateMissing {
		// create is authorized without a name: RBAC cannot narrow it.
		out = append(out, Access{Resource: "configmaps", Verb: "create", Why: fmt.Sprintf("create the missing state ConfigMap %s on the first run", n.StateConfigMap)})
	}
	if n.EvidenceConfigMap != "" {
		out = append(out,
			Access{Resource: "configmaps", Verb: "get", Name: n.EvidenceConfigMap, Why: "keep the evidence of restarts (--evidence-configmap)"},
			Access{Resource: "configmaps", Verb: "update", Name: n.EvidenceConfigMap, Why: "keep the evidence of restarts (--evidence-configmap)"},
		)
	}
	if n.EvidenceLogs {
		out = append(out, Access{Resource: "pods", Subresource: "log", Verb: "get", Why: "save the scheduler's last log lines before a restart (--evidence-logs)"})
	}
	out = append(out,
		Access{Resource: "events", Verb: "create", Why: "leave an Event on each object judged or acted on"},
		Access{Group: "apps", Resource: "deployments", Verb: "get", Name: n.Deployment, Why: "hold restarts while the scheduler rolls out (--deployment)"},
	)
	if restarts && n.RestartMethod == decide.MethodRollout {
		out = append(out, Access{Group: "apps", Resource: "deployments", Verb: "patch", Name: n.Deployment, Why: "restart a wedged scheduler (--restart-method rollout)"})
	}
	switch {
	// ReplicaSet names change with every rollout: not narrowed by name.
	case n.JudgePods == decide.JudgeDeployment:
		out = append(out, Access{Group: "apps", Resource: "replicasets", Verb: "get", Why: "judge only the Deployment's pods: pod → ReplicaSet → Deployment by UID (--judge-pods deployment)"})
	case n.RestartMethod == decide.MethodRollout:
		out = append(out, Access{Group: "apps", Resource: "replicasets", Verb: "get", Why: "check pod → ReplicaSet → Deployment by UID before a rollout restart (--restart-method rollout)"})
	}
	if n.LeaderLease != "" {
		out = append(out, Access{Group: "coordination.k8s.io", Resource: "leases", Verb: "get", Name: n.LeaderLease, Why: "judge only the scheduler's leader (--leader-lease)"})
	}
	if n.ElectionLease != "" {
		out = append(out,
			Access{Group: "coordination.k8s.io", Resource: "leases", Verb: "get", Name: n.ElectionLease, Why: "the watchdog's own leader election (--leader-elect-lease)"},
			Access{Group: "coordination.k8s.io", Resource: "leases", Verb: "update", Name: n.ElectionLease, Why: "the watchdog's own leader election (--leader-elect-lease)"},
		)
		if n.ElectionLeaseMissing {
			out = append(out, Access{Group: "coordination.k8s.io", Resource: "leases", Verb: "create", Why: fmt.Sprintf("create the missing election Lease %s", n.ElectionLease)})
		}
	}
	return out
}
