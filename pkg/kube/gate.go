package kube

import (
	"net/http"
	"sync/atomic"
)

// firstRequestGate holds requests back until the client's first request has an
// answer, then lets everything through.
//
// Why: client-go's transport learns that a connection speaks HTTP/2 only after its
// TLS handshake, so requests sent together before any connection exists each dial
// and handshake their own; all but one connection are then closed unused. A check
// starts with three concurrent reads. The price: the other reads wait for the whole
// first request, not only its handshake (docs/performance.md).
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
		// Opened on success, failure and panic alike: a failed first request must
		// not hold the others, which then fail (or succeed) on their own.
		defer close(g.open)
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

// WrappedRoundTripper lets client-go's utilities (closing idle connections, say)
// reach the transport underneath.
func (g *firstRequestGate) WrappedRoundTripper() http.RoundTripper { return g.next }
