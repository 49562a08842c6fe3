package testenv

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Proxy stands between the watchdog and the API server on 127.0.0.1: it counts
// the requests and injects faults (refusals, statuses, delays, actions behind the
// watchdog's back). Upstream it authenticates as the admin, so it stands for the
// API server as a whole; RBAC is proven elsewhere.
type Proxy struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	uris     []string
	fault    func(r *http.Request) *Fault
}

// Fault is what the proxy does instead of (or before) forwarding a request.
type Fault struct {
	// Drop closes the connection without an answer: an API server that went away.
	Drop bool
	// Status answers with a Kubernetes Status of this code (and Retry-After).
	Status     int
	Reason     metav1.StatusReason
	RetryAfter string
	// Delay holds the request before going on.
	Delay time.Duration
	// Before runs before the request is forwarded (when nothing else answers).
	Before func()
	// Body answers 200 with this JSON instead of asking the API server: a stale
	// answer, as a lagging watch cache would give.
	Body []byte
}

// NewProxy starts a TLS proxy to env's API server.
func (e *Env) NewProxy() (*Proxy, error) {
	upstream, err := url.Parse(e.Config.Host)
	if err != nil {
		return nil, err
	}
	transport, err := rest.TransportFor(e.Config)
	if err != nil {
		return nil, err
	}
	p := &Proxy{}
	rp := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Header.Del("Authorization") // the admin's client certificate speaks upstream
		},
	}
	p.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.requests = append(p.requests, r.Method+" "+r.URL.Path)
		p.uris = append(p.uris, r.Method+" "+r.URL.RequestURI())
		fault := p.fault
		p.mu.Unlock()
		if fault != nil {
			if f := fault(r); f != nil {
				if f.Delay > 0 {
					time.Sleep(f.Delay)
				}
				switch {
				case f.Drop:
					if hj, ok := w.(http.Hijacker); ok {
						if conn, _, err := hj.Hijack(); err == nil {
							_ = conn.Close()
							return
						}
					}
					panic(http.ErrAbortHandler)
				case f.Status != 0:
					writeStatus(w, f)
					return
				case f.Body != nil:
					w.Header().Set("Content-Type", "application/json")
					_, _ = w.Write(f.Body)
					return
				case f.Before != nil:
					f.Before()
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	return p, nil
}

func writeStatus(w http.ResponseWriter, f *Fault) {
	reason := f.Reason
	if reason == "" {
		reason = metav1.StatusReason(strings.ReplaceAll(http.StatusText(f.Status), " ", ""))
	}
	st := metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(f.Status), Reason: reason,
		Message: fmt.Sprintf("injected by the test proxy: %d %s", f.Status, reason),
	}
	if f.RetryAfter != "" {
		w.Header().Set("Retry-After", f.RetryAfter)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(f.Status)
	_ = json.NewEncoder(w).Encode(st)
}

// SetFault installs a fault function (nil: forward everything).
func (p *Proxy) SetFault(f func(r *http.Request) *Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
}

// Requests returns "METHOD /path" for every request so far, and forgets them.
func (p *Proxy) Requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.requests
	p.requests = nil
	return out
}

// RequestURIs returns "METHOD /path?query" for every request so far, and forgets
// them (Requests keeps its own record).
func (p *Proxy) RequestURIs() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.uris
	p.uris = nil
	return out
}

// Kubeconfig writes a kubeconfig for the proxy into dir and returns its path.
func (p *Proxy) Kubeconfig(dir string) (string, error) {
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Certificate().Raw})
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL, CertificateAuthorityData: ca}
	cfg.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{Token: "proxied"}
	cfg.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	cfg.CurrentContext = "proxy"
	path := filepath.Join(dir, "proxy.kubeconfig")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return path, clientcmd.WriteToFile(*cfg, path)
}
