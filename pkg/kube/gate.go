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
// starts with three concurrent reads, so it paid for three handshakes (and the API
// server for three) where one does. Waiting for the first answer costs one round
// trip on loopback-like latencies and saves two handshakes (docs/performance.md).
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
		// Opened on success and failure alike: a failed first request must not
		// hold the others, which then fail (or succeed) on their own.
		defer close(g.open)
		return g.next.RoundTrip(req)
	}
	select {
	case <-g.open:
	case <-req.Context().Done():
		return nil, req.Context().Err()
	}
	return g.next.RoundTrip(req)
}
