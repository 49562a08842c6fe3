package deliver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"time"

	retryablehttp "github.com/hashicorp/go-retryablehttp"

	"github.com/agentenv/watchdog/pkg/httpbound"
	"github.com/agentenv/watchdog/pkg/state"
)

// Per delivery (all attempts and back-off), within the caller's context.
const (
	DefaultAttempts = 3
	DefaultBudget   = 30 * time.Second
)

// Poster POSTs to one URL with go-retryablehttp's retries, a bound on the whole delivery,
// no redirect to another host or scheme, and errors that never carry the (secret) URL.
type Poster struct {
	name, url string
	client    *retryablehttp.Client
	transport *http.Transport // Reach dials with it too
	budget    time.Duration
	secrets   [][2]string // replaced in errors (receivers echo requests), longest first: a header before its token
}

// NewPoster builds a poster for name (used in errors instead of the URL); budget ≤ 0 is DefaultBudget.
func NewPoster(name, rawURL string, attemptTimeout time.Duration, attempts int, budget time.Duration) *Poster {
	transport := &http.Transport{
		Proxy:                  http.ProxyFromEnvironment,
		DialContext:            (&net.Dialer{Timeout: attemptTimeout}).DialContext,
		TLSHandshakeTimeout:    attemptTimeout,
		ResponseHeaderTimeout:  attemptTimeout,
		MaxIdleConns:           2,
		IdleConnTimeout:        30 * time.Second,
		MaxResponseHeaderBytes: httpbound.MaxHeaderBytes,
	}
	c := &retryablehttp.Client{
		HTTPClient: &http.Client{
			Timeout:       attemptTimeout,
			Transport:     transport, // answers: read ≤ snippetRead, the hold's ≤ holdPeerBytes
			CheckRedirect: checkRedirect,
		},
		Logger:       nil, // its messages would carry the URL
		RetryWaitMin: 500 * time.Millisecond,
		RetryWaitMax: 5 * time.Second,
		RetryMax:     max(attempts, 1) - 1,
		Backoff:      retryablehttp.DefaultBackoff, // honours Retry-After on 429 and 503
		ErrorHandler: retryablehttp.PassthroughErrorHandler,
	}
	p := &Poster{name: name, url: rawURL, client: c, transport: transport, budget: cmp.Or(max(budget, 0), DefaultBudget)}
	c.CheckRetry = p.checkRetry
	p.hide("<url>", 1, rawURL)
	if u, err := url.Parse(rawURL); err == nil {
		// Escaped and decoded, without its final slash too (<url>/fail drops it): any path but "/".
		for _, path := range []string{u.Path, u.EscapedPath()} {
			p.hide("<path>", len("/a"), path, strings.TrimSuffix(path, "/"))
		}
		p.hide("<query>", 1, u.RawQuery) // secret whatever its length (?k=1)
		for _, values := range u.Query() {
			p.AddSecrets(values...) // one parameter echoed, decoded (a signature)
		}
		if u.User != nil {
			user := u.User.Username()
			pass, _ := u.User.Password()
			p.AddSecrets(u.User.String(), user+":"+pass, base64.StdEncoding.EncodeToString([]byte(user+":"+pass)), user, pass)
		}
	}
	return p
}

// checkRedirect follows 307/308 to the same host and scheme only.
func checkRedirect(req *http.Request, via []*http.Request) error {
	switch {
	case req.URL.Host != via[0].URL.Host:
		return fmt.Errorf("redirect to another host %w", errRefused)
	case req.URL.Scheme != via[0].URL.Scheme:
		// https → http would send the body and its signature in clear text (Host is equal without ports).
		return fmt.Errorf("redirect to another scheme (https to http, say) %w", errRefused)
	case req.Method != via[0].Method:
		// 301/302/303 turn the POST into a body-less GET whose 2xx would count as delivered.
		return fmt.Errorf("redirect that would drop the body (301/302/303) %w", errRefused)
	case len(via) >= 3:
		return fmt.Errorf("too many redirects: %w", errRefused)
	}
	return nil
}

// AddSecrets adds the sink's credentials to what errors redact, never common short strings ("a", "id").
func (p *Poster) AddSecrets(secrets ...string) { p.hide("<redacted>", minSecretLen, secrets...) }

func (p *Poster) hide(as string, atLeast int, secrets ...string) {
	for _, s := range secrets {
		if len(s) >= atLeast && !slices.ContainsFunc(p.secrets, func(h [2]string) bool { return h[0] == s }) {
			p.secrets = append(p.secrets, [2]string{s, as})
		}
	}
	slices.SortFunc(p.secrets, func(a, b [2]string) int { return len(b[0]) - len(a[0]) })
}

// An answer's body: read up to snippetRead bytes, keep snippetKept of them in an error.
const (
	minSecretLen = 4
	snippetRead  = 4096
	snippetKept  = 256
)

// errRefused ends every redirect the poster does not follow: never retried.
var errRefused = errors.New("refused")

// checkRetry retries network errors, 429 and 5xx, unless Retry-After asks to wait longer than the
// delivery has left (the alert then stays pending); DefaultRetryPolicy ends with the context.
func (p *Poster) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if errors.Is(err, errRefused) {
		return false, err
	}
	deadline, has := ctx.Deadline() // DefaultBackoff without a minimum: Retry-After's wait
	if wait := retryablehttp.DefaultBackoff(0, 0, 0, resp); wait > 0 && has && time.Until(deadline) < wait {
		return false, nil
	}
	return retryablehttp.DefaultRetryPolicy(ctx, resp, err)
}

// Reach connects as a delivery would, sending nothing (a bare TCP connect passes where the TLS handshake fails).
func (p *Poster) Reach(ctx context.Context) error {
	u, err := url.Parse(p.url)
	if err != nil {
		return fmt.Errorf("%s: invalid URL", p.name)
	}
	ctx, cancel := context.WithTimeout(ctx, p.client.HTTPClient.Timeout) // --alert-timeout: positive
	defer cancel()
	var handshake error
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) { handshake = err },
	})
	t := p.transport.Clone()
	if proxy := t.Proxy; proxy != nil {
		// NewClientConn asks about a made-up URL without the port (NO_PROXY=host:port): ask as Post does.
		t.Proxy = func(*http.Request) (*url.URL, error) { return proxy(&http.Request{URL: u}) }
	}
	conn, err := t.NewClientConn(ctx, u.Scheme, net.JoinHostPort(u.Hostname(), u.Port()))
	if err != nil {
		// The transport marks an https proxy's own failed handshake "proxyconnect".
		var op *net.OpError
		if handshake != nil && !(errors.As(err, &op) && op.Op == "proxyconnect") {
			err = fmt.Errorf("TLS handshake: %w", err)
		}
		return fmt.Errorf("%s: %v", p.name, p.redact(scrub(err).Error()))
	}
	return conn.Close()
}

// Post sends body with headers and returns nil on a 2xx answer.
func (p *Poster) Post(ctx context.Context, body []byte, headers http.Header) error {
	return p.exchange(ctx, http.MethodPost, p.url, body, headers, nil)
}

// exchange sends one request to target (derived from p.url), a 2xx answer's body to read.
func (p *Poster) exchange(ctx context.Context, method, target string, body []byte, headers http.Header, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.budget)
	defer cancel()
	req, err := retryablehttp.NewRequestWithContext(ctx, method, target, body) // rewound for each attempt
	if err != nil {
		return fmt.Errorf("%s: build request: %v", p.name, p.redact(scrub(err).Error()))
	}
	maps.Copy(req.Header, headers)
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %v", p.name, p.redact(scrub(err).Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 && read != nil {
		if err := read(resp.Body); err != nil {
			return fmt.Errorf("%s: read answer: %v", p.name, p.redact(scrub(err).Error()))
		}
		return nil
	}
	// Read more than is kept: an echoed credential is redacted whole before the cut.
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, snippetRead))
	if resp.StatusCode/100 != 2 {
		msg := fmt.Sprintf("%s: answered %s", p.name, resp.Status)
		if ra := resp.Header.Get("Retry-After"); ra != "" {
			msg += " (Retry-After " + ra + ")"
		}
		if len(snippet) > 0 {
			msg += fmt.Sprintf(": %q", state.Truncate(p.redact(string(bytes.TrimSpace(snippet))), snippetKept))
		}
		return errors.New(msg)
	}
	return nil
}

// redact removes the poster's secrets from text (of a derived URL too: path and query).
func (p *Poster) redact(text string) string {
	for _, h := range p.secrets {
		text = strings.ReplaceAll(text, h[0], h[1])
	}
	return text
}

// scrub drops the URL from transport errors: for webhooks the URL is the secret.
func scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		var ne net.Error
		if errors.As(ue.Err, &ne) && ne.Timeout() {
			return fmt.Errorf("%s: timed out", ue.Op)
		}
		return fmt.Errorf("%s: %v", ue.Op, scrub(ue.Err))
	}
	return err
}
