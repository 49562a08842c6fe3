package kube

import (
	"net/http"
	"sync/atomic"
)

// firstRequestGate holds requests back until the first one has an answer. Why: the
// transport learns a connection speaks HTTP/2 only after its TLS handshake, so a check's
// first three concurrent reads would each dial and handshake their own. The price: they
// wait for the whole first request, not only its handshake (docs/performance.md).
type firstRequestGate struct {
	next    http.RoundTripper
	claimed atomic.Bool
	open    chan struct{} // closed once the first request has returned
}

func newFirstRequestGate(next http.RoundTripper) *firstRequestGate {
	return &firstRequestGate{next: next, open: make(chan struct{})}
}

func (g *firstRequestGate) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.claimed.CompareAndSwap(false, true) {
		defer close(g.open) // on failure and panic too: the others then fail on their own
		return g.next.RoundTrip(req)
	}
	select {
	case <-g.open:
	case <-req.Context().Done():
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, req.Context().Err()
	}
	return g.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's utilities (closing idle connections) reach the transport.
func (g *firstRequestGate) WrappedRoundTripper() http.RoundTripper { return g.next }
