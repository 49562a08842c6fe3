package scrape

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentenv/watchdog/pkg/httpbound"
)

// Kind says why a scrape could not be trusted. The names appear in reasons and logs.
type Kind string

const (
	KindUnreachable Kind = "unreachable" // connection refused, no route, DNS
	KindTimeout     Kind = "timeout"     // no complete answer within the scrape timeout
	KindHTTPStatus  Kind = "http-status" // answered, but not 200
	KindNotMetrics  Kind = "not-metrics" // a Content-Type that is not the text format
	KindTooLarge    Kind = "too-large"   // body over the size cap
	KindTruncated   Kind = "truncated"   // body ends mid-line or short of Content-Length
	KindParse       Kind = "parse"       // expfmt rejected the page
	KindAbsent      Kind = "absent"      // the observed_nodes family is not there
	KindInvalid     Kind = "invalid"     // NaN, negative, duplicate series, missing status
	KindOther       Kind = "other"       // an error of none of the kinds above
)

// Kinds lists every kind (the metrics start a counter at 0 for each).
var Kinds = []Kind{KindUnreachable, KindTimeout, KindHTTPStatus, KindNotMetrics, KindTooLarge, KindTruncated, KindParse, KindAbsent, KindInvalid, KindOther}

// Error is a scrape that cannot be trusted. Decisions treat every one as "unknown".
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("scrape %s: %v", e.Kind, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the Kind of a scrape error, or "" if err is not one.
func KindOf(err error) Kind {
	if se, ok := errors.AsType[*Error](err); ok {
		return se.Kind
	}
	return ""
}

// Defaults sized for a real scheduler page (~30 KB) served from the pod network.
const (
	DefaultTimeout  = 5 * time.Second
	DefaultMaxBytes = 16 << 20
)

// Scraper fetches metrics pages. The zero value is not usable; use NewScraper.
type Scraper struct {
	client   *http.Client
	timeout  time.Duration
	maxBytes int64
	proxied  bool // through the API server's pod proxy (NewProxiedScraper)
}

// NewScraper returns a scraper bounded by timeout (the whole exchange: a trickling server is cut
// off) and maxBytes of body (after gzip decoding), following no redirect (elsewhere is not the pod).
func NewScraper(timeout time.Duration, maxBytes int64) *Scraper {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	transport := &http.Transport{
		Proxy:                 nil, // pod IPs are never reached through a proxy
		DialContext:           (&net.Dialer{Timeout: timeout, KeepAlive: -1}).DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		DisableKeepAlives:     true,
	}
	client := &http.Client{Transport: httpbound.Transport(transport, maxBytes), Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &Scraper{client: client, timeout: timeout, maxBytes: maxBytes}
}

// Scrape fetches url and extracts the sample.
func (s *Scraper) Scrape(ctx context.Context, url string) (Sample, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Sample{}, &Error{Kind: KindUnreachable, Err: fmt.Errorf("build request for %s: %w", url, err)}
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4;q=1,*/*;q=0.1")
	req.Header.Set("User-Agent", "agentenv-scheduler-watchdog")
	resp, err := s.client.Do(req)
	if err != nil {
		kind := KindUnreachable
		if isTimeout(err) {
			kind = KindTimeout
		}
		return Sample{}, &Error{Kind: kind, Err: fmt.Errorf("GET %s: %w", url, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		if s.proxied { // the API server's Status says why it refused
			return Sample{}, &Error{Kind: KindHTTPStatus, Err: fmt.Errorf("GET %s answered %s: %s", url, resp.Status, statusMessage(resp.Body))}
		}
		// Drain a little so the error is about the status, not the connection.
		_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
		return Sample{}, &Error{Kind: KindHTTPStatus, Err: fmt.Errorf("GET %s answered %s", url, resp.Status)}
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "text/plain" && mt != "application/openmetrics-text") {
			return Sample{}, &Error{Kind: KindNotMetrics, Err: fmt.Errorf("GET %s answered Content-Type %q, not the Prometheus text format", url, ct)}
		}
	}
	sample, err := Extract(resp.Body)
	switch {
	case errors.Is(err, httpbound.ErrTooLarge):
		return Sample{}, &Error{Kind: KindTooLarge, Err: fmt.Errorf("GET %s: body exceeds %d bytes", url, s.maxBytes)}
	case KindOf(err) == KindTimeout:
		return Sample{}, &Error{Kind: KindTimeout, Err: fmt.Errorf("GET %s: body not complete within %s", url, s.timeout)}
	}
	return sample, err
}

// statusMessage is a Kubernetes Status body's message, else its first line (≤ 300 bytes).
func statusMessage(body io.Reader) string {
	raw, _ := io.ReadAll(io.LimitReader(body, 4<<10))
	var status struct {
		Message string `json:"message"`
	}
	msg := strings.TrimSpace(string(raw))
	if json.Unmarshal(raw, &status) == nil && status.Message != "" {
		msg = status.Message
	}
	msg, _, _ = strings.Cut(msg, "\n")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return strings.ToValidUTF8(msg, "")
}

// classifyReadError maps an error met while reading the body.
func classifyReadError(err error) error {
	var se *Error
	switch {
	case errors.As(err, &se):
		return se
	case isTimeout(err):
		return &Error{Kind: KindTimeout, Err: err}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Kind: KindTruncated, Err: fmt.Errorf("body shorter than its Content-Length: %w", err)}
	}
	return &Error{Kind: KindUnreachable, Err: fmt.Errorf("read body: %w", err)}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// Via is how a scheduler pod's metrics are reached (--scrape-via; shown in reports).
type Via string

const (
	ViaAuto      Via = "auto"      // direct in a pod, else the API server: pod IPs are rarely routable from a laptop
	ViaDirect    Via = "direct"    // http://<pod IP>:<port><path>
	ViaAPIServer Via = "apiserver" // GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy<path> (get pods/proxy)
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
