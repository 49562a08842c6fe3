package deliver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// bothSchemes serves https and plain http on one loopback port (the first byte of
// a connection tells a TLS handshake from an HTTP request), so that a redirect can
// change the scheme and nothing else: URL.Host stays the same.
type bothSchemes struct {
	net.Listener
	tls *tls.Config
}

func (l bothSchemes) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	conn := peeked{Conn: c, r: br}
	if err == nil && first[0] == 0x16 { // TLS record type: handshake
		return tls.Server(conn, l.tls), nil
	}
	return conn, nil
}

type peeked struct {
	net.Conn
	r *bufio.Reader
}

func (p peeked) Read(b []byte) (int, error) { return p.r.Read(b) }

// TestPosterRefusesSchemeChangingRedirect: an https receiver that answers 307 to
// the same host over http must not get the body (and its signature) in clear text.
func TestPosterRefusesSchemeChangingRedirect(t *testing.T) {
	// httptest's certificate (for 127.0.0.1) and a client that trusts it.
	certSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer certSrv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(certSrv.Certificate())

	var mu sync.Mutex
	var cleartext, encrypted []string
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.TLS == nil {
			cleartext = append(cleartext, string(body)+" "+r.Header.Get("X-Signature"))
			w.WriteHeader(http.StatusNoContent)
			return
		}
		encrypted = append(encrypted, string(body))
		switch r.URL.Path {
		case secretPath:
			http.Redirect(w, r, "http://"+r.Host+secretPath+"/plain", http.StatusTemporaryRedirect)
		case secretPath + "/tls":
			http.Redirect(w, r, "https://"+r.Host+secretPath+"/tls-again", http.StatusTemporaryRedirect)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})}
	go func() { _ = srv.Serve(bothSchemes{Listener: ln, tls: certSrv.TLS}) }()
	defer srv.Close()
	base := "https://" + ln.Addr().String()

	newPoster := func(url string) *Poster {
		p := NewPoster("webhook", url, 2*time.Second, 1, 5*time.Second)
		p.transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		return p
	}
	hdr := http.Header{}
	hdr.Set("X-Signature", "sha256=deadbeef")

	// A same-scheme redirect on the same host is still followed.
	if err := newPoster(base+secretPath+"/tls").Post(context.Background(), []byte(`{"event":"same-scheme"}`), hdr); err != nil {
		t.Fatalf("https → https on the same host: %v", err)
	}

	err = newPoster(base+secretPath).Post(context.Background(), []byte(`{"event":"wedged"}`), hdr)
	if err == nil || !strings.Contains(err.Error(), "another scheme") {
		t.Errorf("https → http redirect: want a refusal naming the scheme change, got %v", err)
	}
	noSecret(t, err)
	mu.Lock()
	defer mu.Unlock()
	if len(cleartext) > 0 {
		t.Errorf("the body and signature went out in clear text: %q", cleartext)
	}
	if len(encrypted) != 3 {
		t.Errorf("https requests %q: want the same-scheme pair and the one refused redirect's origin", encrypted)
	}
}
