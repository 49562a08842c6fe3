package endpoints

import (
	"fmt"
	"strings"
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

// countNodes counts a list at once.
func countNodes(list []discoveryv1.EndpointSlice, port int32) Count {
	k := Counter{Port: port}
	_ = k.Add(list)
	return k.Count()
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
			got := countNodes(tc.slices, 8000)
			if got.Serving != tc.wantServing || got.Lingering != tc.wantLingering {
				t.Errorf("got serving=%d lingering=%d, want %d and %d", got.Serving, got.Lingering, tc.wantServing, tc.wantLingering)
			}
		})
	}
}

// TestCounterPageByPage: counted page by page, a Service's slices give the count
// they give at once (a node on two pages counts once, active anywhere is not
// lingering); past MaxNodes unique node ids the count is refused, naming the bound.
func TestCounterPageByPage(t *testing.T) {
	yes := ptr.To(true)
	pages := [][]discoveryv1.EndpointSlice{
		{slice(8000, ep{name: "a", addr: true, serving: yes, terminating: yes}), slice(9000, ep{name: "x", addr: true, serving: yes})},
		{slice(8000, ep{name: "a", addr: true, serving: yes}, ep{name: "b", addr: true, serving: yes, terminating: yes})},
	}
	k := Counter{Port: 8000}
	for _, p := range pages {
		if err := k.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := k.Count(), countNodes(append(pages[0], pages[1]...), 8000); got.Serving != want.Serving || got.Lingering != want.Lingering ||
		got.AllSlices != 3 || got.Slices != 2 || len(got.OtherPorts) != 1 || got.Serving != 1 || got.Lingering != 1 {
		t.Errorf("page by page %+v, at once %+v", got, want)
	}
	big := Counter{Port: 8000}
	var page []discoveryv1.EndpointSlice
	for i := range MaxNodes + 1 {
		if i%100 == 0 {
			page = append(page, slice(8000))
		}
		s := &page[len(page)-1]
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.1"}, TargetRef: &corev1.ObjectReference{Name: fmt.Sprint("n", i)},
			Conditions: discoveryv1.EndpointConditions{Serving: yes}})
	}
	if err := big.Add(page[:len(page)-1]); err != nil {
		t.Fatalf("%d nodes: %v", MaxNodes, err)
	}
	if err := big.Add(page[len(page)-1:]); err == nil || !strings.Contains(err.Error(), "20000") {
		t.Errorf("%d nodes: %v, want an error naming the bound", MaxNodes+1, err)
	}
}
