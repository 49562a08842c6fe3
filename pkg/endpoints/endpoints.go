// Package endpoints counts the runtime nodes the scheduler's discovery should see,
// reading the same EndpointSlices the same way the scheduler does (DESIGN §2).
package endpoints

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/pkg/kube"
)

// Count is what discovery should see.
type Count struct {
	// Serving is the number of unique node ids (targetRef.name) with at least one
	// serving, non-terminating endpoint that has an address: the scheduler's
	// "active" nodes, and the watchdog's expected count.
	Serving int `json:"serving"`
	// Lingering is the number of node ids whose only endpoints are terminating.
	Lingering int `json:"lingering"`
	// Slices is how many slices carried the node port.
	Slices int `json:"slices"`
}

// CountNodes applies the scheduler's discovery rules to slices: only slices that carry
// port; an endpoint counts when conditions.serving is true (nil is false), it names a
// targetRef and has an address; terminating makes it lingering. conditions.ready is
// ignored because the Service publishes not-ready addresses, so it is always true.
func CountNodes(slices []discoveryv1.EndpointSlice, port int32) Count {
	active := map[string]struct{}{}
	lingering := map[string]struct{}{}
	var c Count
	for i := range slices {
		s := &slices[i]
		if !hasPort(s, port) {
			continue
		}
		c.Slices++
		for _, ep := range s.Endpoints {
			if ep.TargetRef == nil || ep.TargetRef.Name == "" || len(ep.Addresses) == 0 {
				continue
			}
			if ep.Conditions.Serving == nil || !*ep.Conditions.Serving {
				continue
			}
			if ep.Conditions.Terminating != nil && *ep.Conditions.Terminating {
				lingering[ep.TargetRef.Name] = struct{}{}
				continue
			}
			active[ep.TargetRef.Name] = struct{}{}
		}
	}
	for name := range active {
		delete(lingering, name)
	}
	c.Serving, c.Lingering = len(active), len(lingering)
	return c
}

func hasPort(s *discoveryv1.EndpointSlice, port int32) bool {
	for _, p := range s.Ports {
		if p.Port != nil && *p.Port == port {
			return true
		}
	}
	return false
}

// pageSize keeps each list response small on clusters with thousands of nodes.
const pageSize = 500

// Lister reads the node Service's EndpointSlices from the API server.
type Lister struct {
	Client    *kube.Client
	Namespace string
	Service   string
	Port      int32
}

// Expected lists the Service's EndpointSlices (paginated) and counts them.
func (l Lister) Expected(ctx context.Context) (Count, error) {
	var all []discoveryv1.EndpointSlice
	opts := kube.FromCache(metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + l.Service,
		Limit:         pageSize,
	})
	for {
		list, err := l.Client.ListEndpointSlices(ctx, l.Namespace, opts)
		if err != nil {
			return Count{}, fmt.Errorf("list EndpointSlices of service %s/%s: %w", l.Namespace, l.Service, err)
		}
		all = append(all, list.Items...)
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	return CountNodes(all, l.Port), nil
}
