package observe

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentenv/watchdog/pkg/endpoints"
	"github.com/agentenv/watchdog/pkg/kube"
)

// pageSize keeps each list response small (a slice holds up to 100 endpoints);
// maxPages bounds a list that never ends. Pages are counted as they come.
const pageSize, maxPages = 50, 100

// EndpointLister reads the node Service's EndpointSlices from the API server.
type EndpointLister struct {
	Client    *kube.Client
	Namespace string
	Service   string
	Port      int32
}

// Read counts the Service's EndpointSlices, listed page by page from the watch cache
// or, consistent, quorum. A count that cannot come from a correctly named Service and
// port (*endpoints.MisconfiguredError), or past endpoints.MaxNodes, is an error.
func (l EndpointLister) Read(ctx context.Context, consistent bool) (endpoints.Count, error) {
	k := endpoints.Counter{Port: l.Port}
	opts := metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + l.Service, Limit: pageSize}
	if !consistent {
		opts = kube.FromCache(opts)
	}
	for page := 1; ; page++ {
		list, err := l.Client.ListEndpointSlices(ctx, l.Namespace, opts)
		if err == nil {
			err = k.Add(list.Items)
		}
		if err != nil {
			return endpoints.Count{}, fmt.Errorf("list EndpointSlices of service %s/%s: %w", l.Namespace, l.Service, err)
		}
		if list.Continue == "" {
			break
		}
		if page == maxPages {
			return endpoints.Count{}, fmt.Errorf("list EndpointSlices of service %s/%s: more than %d pages of %d", l.Namespace, l.Service, maxPages, pageSize)
		}
		opts.Continue = list.Continue
	}
	c := k.Count()
	return c, c.Check(l.Namespace, l.Service, l.Port)
}
