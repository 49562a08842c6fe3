package kube

import (
	"context"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The discovery probe's canary (pkg/probe): created, read back by name, deleted.

func (c *Client) CreateEndpointSlice(ctx context.Context, s *discoveryv1.EndpointSlice, opts metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	return into[discoveryv1.EndpointSlice](ctx, c.discovery.Post().Namespace(s.Namespace).Resource("endpointslices").VersionedParams(&opts, params).Body(s))
}

func (c *Client) GetEndpointSlice(ctx context.Context, ns, name string) (*discoveryv1.EndpointSlice, error) {
	return into[discoveryv1.EndpointSlice](ctx, c.discovery.Get().Namespace(ns).Resource("endpointslices").Name(name))
}

func (c *Client) DeleteEndpointSlice(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
	return c.discovery.Delete().Namespace(ns).Resource("endpointslices").Name(name).Body(&opts).Do(ctx).Error()
}
