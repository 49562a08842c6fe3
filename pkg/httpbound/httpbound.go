// Package httpbound bounds what the watchdog's HTTP clients accept: a body up to a
// limit (a huge answer must not OOM-kill a small pod), and no redirect.
package httpbound

import (
	"errors"
	"fmt"
	"io"
	"net/http"

	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// MaxHeaderBytes bounds every answer's headers (Go's default: 10 MiB).
const MaxHeaderBytes = 64 << 10

// ErrRedirect is a redirect the client refused.
var ErrRedirect = errors.New("redirect refused: the watchdog only talks to the URL it was given")

// Client returns a client over Transport(base, limit) that follows no redirect.
func Client(base http.RoundTripper, limit int64) *http.Client {
	refuse := func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("%w (answered with Location %s://%s)", ErrRedirect, req.URL.Scheme, req.URL.Host)
	}
	return &http.Client{Transport: Transport(base, limit), CheckRedirect: refuse}
}

// Transport wraps base (nil: http.DefaultTransport) to cut every body at limit bytes (Limit),
// and its headers as Headers.
func Transport(base http.RoundTripper, limit int64) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return capped{base: Headers(base), limit: limit}
}

// Headers bounds rt's answers' headers at MaxHeaderBytes when it is an *http.Transport
// or client-go's cache entry wrapping one (rest.Config.Wrap's base transport).
func Headers(rt http.RoundTripper) http.RoundTripper {
	t, ok := rt.(*http.Transport)
	if w, wrapped := rt.(utilnet.RoundTripperWrapper); wrapped { // client-go's TLS cache entry
		t, ok = w.WrappedRoundTripper().(*http.Transport)
	}
	if !ok || (t.MaxResponseHeaderBytes > 0 && t.MaxResponseHeaderBytes <= MaxHeaderBytes) {
		return rt
	}
	t = t.Clone()
	t.MaxResponseHeaderBytes = MaxHeaderBytes
	if _, ok := t.TLSNextProto["h2"]; ok {
		// x/net's HTTP/2 reads rt's bound: set it up afresh on the copy, as client-go does.
		t.TLSNextProto = nil
		t = utilnet.SetTransportDefaults(t)
	}
	return bounded{t, rt}
}

// bounded is the bounded copy, keeping rt: losing it would end client-go's cache
// entry and its client certificate rotation.
type bounded struct {
	*http.Transport
	rt http.RoundTripper
}

// ErrTooLarge is an answer whose body exceeds the bound.
var ErrTooLarge = errors.New("answer body exceeds the bound")

type capped struct {
	base  http.RoundTripper
	limit int64
}

func (c capped) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	resp.Body = Limit(resp.Body, c.limit)
	return resp, nil
}

// Limit cuts body at limit bytes: a read beyond fails with ErrTooLarge.
func Limit(body io.ReadCloser, limit int64) io.ReadCloser {
	return limitedBody{http.MaxBytesReader(nil, body, limit)}
}

// limitedBody says which bound an answer broke (MaxBytesReader's error speaks of a request).
type limitedBody struct{ io.ReadCloser }

func (b limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if tooLarge, ok := errors.AsType[*http.MaxBytesError](err); ok {
		err = fmt.Errorf("%w (%d bytes)", ErrTooLarge, tooLarge.Limit)
	}
	return n, err
}
