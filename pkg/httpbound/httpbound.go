// Package httpbound bounds what the watchdog's HTTP clients accept from an
// answer: its body is read up to a limit (a huge answer must not OOM-kill a small
// pod), and a redirect is refused (the watchdog talks to the URL it was given).
package httpbound

import (
	"errors"
	"fmt"
	"io"
	"net/http"
)

// ErrRedirect is a redirect the client refused.
var ErrRedirect = errors.New("redirect refused: the watchdog only talks to the URL it was given")

// Client returns a client whose every answer's body is cut at limit bytes (a
// reader of it then fails with ErrTooLarge) and which follows no redirect.
// base nil: http.DefaultTransport.
func Client(base http.RoundTripper, limit int64) *http.Client {
	refuse := func(req *http.Request, _ []*http.Request) error {
		return fmt.Errorf("%w (answered with Location %s://%s)", ErrRedirect, req.URL.Scheme, req.URL.Host)
	}
	return &http.Client{Transport: Transport(base, limit), CheckRedirect: refuse}
}

// Transport wraps base so that every answer's body is cut at limit bytes.
func Transport(base http.RoundTripper, limit int64) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return capped{base: base, limit: limit}
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
	resp.Body = &limitedBody{ReadCloser: resp.Body, left: c.limit, limit: c.limit}
	return resp, nil
}

// limitedBody reads at most limit bytes, then fails with ErrTooLarge.
type limitedBody struct {
	io.ReadCloser
	left, limit int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		// One byte more tells a body of exactly limit bytes from a larger one.
		var one [1]byte
		if n, _ := b.ReadCloser.Read(one[:]); n == 0 {
			return 0, io.EOF
		}
		return 0, fmt.Errorf("%w (%d bytes)", ErrTooLarge, b.limit)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
