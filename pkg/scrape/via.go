package scrape

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

// Via is how a scheduler pod's metrics are reached (--scrape-via; shown in reports).
type Via string

const (
	// ViaAuto is direct inside a pod and through the API server elsewhere: pod IPs
	// are routable from the cluster's pods, rarely from a laptop.
	ViaAuto Via = "auto"
	// ViaDirect: http://<pod IP>:<port><path>.
	ViaDirect Via = "direct"
	// ViaAPIServer: the API server's pod proxy,
	// GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy<path> (RBAC: get pods/proxy).
	ViaAPIServer Via = "apiserver"
)

// ParseVia reads a --scrape-via value.
func ParseVia(s string) (Via, error) {
	if v := Via(s); slices.Contains([]Via{ViaAuto, ViaDirect, ViaAPIServer}, v) {
		return v, nil
	}
	return "", fmt.Errorf("%q: want auto, direct or apiserver", s)
}

// Resolve turns auto into the path taken: direct in a pod (in-cluster credentials).
func (v Via) Resolve(inPod bool) Via {
	if v != ViaAuto {
		return v
	}
	if inPod {
		return ViaDirect
	}
	return ViaAPIServer
}

// Describe says which path a scrape took (auto resolved), as reports and doctor say it.
func (v Via) Describe() string {
	if v == ViaAPIServer {
		return "through the API server's pod proxy (--scrape-via apiserver)"
	}
	return "directly from the pod IP (--scrape-via direct)"
}

// NewProxiedScraper is NewScraper over an authenticated transport to the API server
// (rest.TransportFor, ViaAPIServer), a refusal reported with the API server's message.
func NewProxiedScraper(rt http.RoundTripper, timeout time.Duration, maxBytes int64) *Scraper {
	s := NewScraper(timeout, maxBytes)
	s.client.Transport = httpbound.Transport(rt, s.maxBytes)
	s.proxied = true
	return s
}
