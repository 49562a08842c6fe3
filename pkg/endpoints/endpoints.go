// Package endpoints counts the runtime nodes the scheduler's discovery should see,
// reading the EndpointSlices as the scheduler does (docs/design.md §1); it makes no API call.
package endpoints

import (
	"fmt"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

// Count is what discovery should see.
type Count struct {
	// Serving counts the node ids (targetRef.name) with a serving, non-terminating
	// endpoint that has an address: the scheduler's "active" nodes, the expected count.
	Serving   int      `json:"serving"`
	Nodes     []string `json:"-"`         // those node ids, sorted (the discovery probe compares them)
	Lingering int      `json:"lingering"` // node ids whose only endpoints are terminating
	Slices    int      `json:"slices"`    // slices carrying the node port
	// AllSlices counts the Service's slices; OtherPorts are their ports other than
	// the node port (what a wrong --nodes-port would see).
	AllSlices  int     `json:"allSlices"`
	OtherPorts []int32 `json:"otherPorts,omitempty"`
}

// MisconfiguredError says the flags name no slice (a wrong --nodes-service) or only
// other ports (a wrong --nodes-port): counting 0 there would judge every wedge
// "no-nodes", leaving the watchdog silently blind.
type MisconfiguredError struct {
	Namespace, Service string
	Port               int32
	Count              Count
}

func (e *MisconfiguredError) Error() string {
	if e.Count.AllSlices == 0 {
		return fmt.Sprintf("no EndpointSlice belongs to Service %s/%s (label %s=%s): check --nodes-service", e.Namespace, e.Service, discoveryv1.LabelServiceName, e.Service)
	}
	return fmt.Sprintf("none of the %d EndpointSlice(s) of Service %s/%s carries port %d (they carry %v): check --nodes-port", e.Count.AllSlices, e.Namespace, e.Service, e.Port, e.Count.OtherPorts)
}

// Check reports a count that cannot come from a correctly named Service and port. A
// Service with no endpoints is not misconfigured: its placeholder slice carries no port.
func (c Count) Check(namespace, service string, port int32) error {
	if c.AllSlices == 0 || (c.Slices == 0 && len(c.OtherPorts) > 0) {
		return &MisconfiguredError{Namespace: namespace, Service: service, Port: port, Count: c}
	}
	return nil
}

// MaxNodes bounds the unique node ids a count keeps: beyond, it is refused (unknown).
const MaxNodes = 20000

// Counter applies the scheduler's discovery rules page by page to the slices carrying
// Port (docs/design.md, "What discovery counts as a node"), keeping node ids, never
// slices; conditions.ready is ignored (the Service publishes not-ready addresses).
type Counter struct {
	Port              int32
	c                 Count
	active, lingering sets.Set[string]
	otherPorts        sets.Set[int32]
}

// Add counts one page; past MaxNodes node ids it fails (the count is then unknown).
func (k *Counter) Add(page []discoveryv1.EndpointSlice) error {
	if k.active == nil {
		k.active, k.lingering, k.otherPorts = sets.New[string](), sets.New[string](), sets.New[int32]()
	}
	k.c.AllSlices += len(page)
	for i := range page {
		s := &page[i]
		if !slices.ContainsFunc(s.Ports, func(p discoveryv1.EndpointPort) bool { return p.Port != nil && *p.Port == k.Port }) {
			for _, p := range s.Ports {
				if p.Port != nil {
					k.otherPorts.Insert(*p.Port)
				}
			}
			continue
		}
		k.c.Slices++
		for _, ep := range s.Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Name == "" || len(ep.Addresses) == 0 ||
				!ptr.Deref(ep.Conditions.Serving, false) {
				continue
			}
			if ptr.Deref(ep.Conditions.Terminating, false) {
				k.lingering.Insert(ep.TargetRef.Name)
			} else {
				k.active.Insert(ep.TargetRef.Name)
			}
		}
		if n := k.active.Len() + k.lingering.Len(); n > MaxNodes {
			return fmt.Errorf("more than %d unique node ids in the EndpointSlices (the bound of a count): not counted", MaxNodes)
		}
	}
	return nil
}

// Count is what the pages added so far give.
func (k *Counter) Count() Count {
	c := k.c
	c.Serving, c.Lingering, c.Nodes = k.active.Len(), k.lingering.Difference(k.active).Len(), sets.List(k.active)
	if k.otherPorts.Len() > 0 {
		c.OtherPorts = sets.List(k.otherPorts)
	}
	return c
}
