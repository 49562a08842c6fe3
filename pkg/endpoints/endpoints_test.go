package endpoints

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"
)

type ep struct {
	name        string
	addr        bool
	serving     *bool
	ready       *bool
	terminating *bool
}

func slice(port int32, eps ...ep) discoveryv1.EndpointSlice {
	s := discoveryv1.EndpointSlice{Ports: []discoveryv1.EndpointPort{{Port: ptr.To(port)}}}
	for _, e := range eps {
		d := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{Serving: e.serving, Ready: e.ready, Terminating: e.terminating}}
		if e.addr {
			d.Addresses = []string{"10.0.0.1"}
		}
		if e.name != "" {
			d.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: e.name}
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	return s
}

func TestCountNodes(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	cases := []struct {
		name          string
		slices        []discoveryv1.EndpointSlice
		wantServing   int
		wantLingering int
	}{
		{"empty", nil, 0, 0},
		{"three serving", []discoveryv1.EndpointSlice{slice(8000,
			ep{name: "a", addr: true, serving: yes}, ep{name: "b", addr: true, serving: yes}, ep{name: "c", addr: true, serving: yes})}, 3, 0},
		{"serving nil is false", []discoveryv1.EndpointSlice{slice(8000, ep{name: "a", addr: true})}, 0, 0},
		{"serving false but ready true does not count", []discoveryv1.EndpointSlice{slice(8000, ep{name: "a", addr: true, serving: no, ready: yes})}, 0, 0},
		{"ready false but serving true counts", []discoveryv1.EndpointSlice{slice(8000, ep{name: "a", addr: true, serving: yes, ready: no})}, 1, 0},
		{"terminating is lingering", []discoveryv1.EndpointSlice{slice(8000, ep{name: "a", addr: true, serving: yes, terminating: yes})}, 0, 1},
		{"terminating false counts", []discoveryv1.EndpointSlice{slice(8000, ep{name: "a", addr: true, serving: yes, terminating: no})}, 1, 0},
		{"no targetRef", []discoveryv1.EndpointSlice{slice(8000, ep{addr: true, serving: yes})}, 0, 0},
		{"no address", []discoveryv1.EndpointSlice{slice(8000, ep{name: "a", serving: yes})}, 0, 0},
		{"other port ignored", []discoveryv1.EndpointSlice{slice(9000, ep{name: "a", addr: true, serving: yes})}, 0, 0},
		{"duplicates across slices count once", []discoveryv1.EndpointSlice{
			slice(8000, ep{name: "a", addr: true, serving: yes}),
			slice(8000, ep{name: "a", addr: true, serving: yes}, ep{name: "b", addr: true, serving: yes})}, 2, 0},
		{"active anywhere is not lingering", []discoveryv1.EndpointSlice{
			slice(8000, ep{name: "a", addr: true, serving: yes, terminating: yes}),
			slice(8000, ep{name: "a", addr: true, serving: yes})}, 1, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CountNodes(tc.slices, 8000)
			if got.Serving != tc.wantServing || got.Lingering != tc.wantLingering {
				t.Errorf("got serving=%d lingering=%d, want %d and %d", got.Serving, got.Lingering, tc.wantServing, tc.wantLingering)
			}
		})
	}
}
