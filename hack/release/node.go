package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// The two commands a real node on this machine needs (hack/cluster.sh): the OCI
// registry containerd pulls from, and single-binary images of the test programs
// pushed to it, built as the watchdog's image is (the local base, no Docker).

// registryCommand serves go-containerregistry's registry (the one test/release
// pushes to) on a loopback address until SIGTERM.
func registryCommand(args []string) error {
	fs := flag.NewFlagSet("registry", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address: loopback only")
	addrFile := fs.String("addr-file", "", "write the address listened on to this file once serving")
	authFile := fs.String("basic-auth-file", "", "file holding USER:PASSWORD: every request must carry them (basic auth), as a private registry asks")
	tlsCert := fs.String("tls-cert", "", "serve https with this certificate (PEM; --tls-key its key), as a registry with a private CA does")
	tlsKey := fs.String("tls-key", "", "the key of --tls-cert (PEM)")
	token := fs.Bool("token", false, "with --basic-auth-file: every request must carry a bearer token, which /token gives for USER:PASSWORD (a registry's token auth)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("--addr: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("--addr %s: the registry serves on a loopback address only", *addr)
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	var handler http.Handler = registry.New(registry.WithReferrersSupport(true))
	if *authFile != "" {
		b, err := os.ReadFile(*authFile)
		if err != nil {
			return fmt.Errorf("--basic-auth-file: %w", err)
		}
		user, pass, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
		if !ok || user == "" || pass == "" {
			return fmt.Errorf("--basic-auth-file %s: want USER:PASSWORD", *authFile)
		}
		if *token {
			handler = tokenAuth(handler, user, pass)
		} else {
			handler = basicAuth(handler, user, pass)
		}
	} else if *token {
		return errors.New("--token needs --basic-auth-file: the password a token is given for")
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if *addrFile != "" {
		tmp := *addrFile + ".tmp"
		if err := os.WriteFile(tmp, []byte(l.Addr().String()), 0o644); err != nil {
			return err
		}
		if err := os.Rename(tmp, *addrFile); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	serve := func() error { return srv.Serve(l) }
	if *tlsCert != "" || *tlsKey != "" {
		// HTTP/1.1 only: the in-memory registry holds one lock while it reads an
		// upload's body, and over HTTP/2 the other uploads' streams on the same
		// connection then fill its flow-control window: every push hangs.
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		serve = func() error { return srv.ServeTLS(l, *tlsCert, *tlsKey) }
	}
	if err := serve(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// binaryImageCommand builds a one-platform image of a static binary on the local
// base (the binary its entrypoint, uid 65532) and pushes it; prints the digest.
func binaryImageCommand(args []string) error {
	fs := flag.NewFlagSet("binary-image", flag.ContinueOnError)
	bin := fs.String("binary", "", "static binary (built for this machine's platform)")
	var cmdArgs multiFlag
	fs.Var(&cmdArgs, "cmd", "the image's default argument (repeat)")
	refFlag := fs.String("ref", "", "where to push: REGISTRY/REPOSITORY:TAG")
	insecure := fs.Bool("insecure", false, "plain HTTP (a registry on loopback)")
	caBundle := fs.String("ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle of the local base")
	timeout := fs.Duration("timeout", 2*time.Minute, "deadline of the push")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bin == "" || *refFlag == "" {
		return errors.New("binary-image: --binary and --ref are required")
	}
	ref, err := tagRef(*refFlag, *insecure)
	if err != nil {
		return err
	}
	// A fixed time: the same binary gives the same digest.
	at := time.Unix(0, 0).UTC()
	p := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	base, err := localBase(p, *caBundle, at)
	if err != nil {
		return err
	}
	img, err := withBinary(base, p, *bin, entry{path: "/" + filepath.Base(*bin), cmd: cmdArgs}, map[string]string{"org.opencontainers.image.version": ref.TagStr()}, at)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := remote.Write(ref, img, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Println(d)
	return nil
}

// basicAuth refuses a request without the user and password, with the challenge
// a registry sends (so that clients answer it with their stored credentials).
func basicAuth(next http.Handler, user, pass string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(user)) != 1 || subtle.ConstantTimeCompare([]byte(p), []byte(pass)) != 1 {
			refuse(w, `Basic realm="watchdog test registry"`)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// tokenAuth is the token auth most private registries speak (Harbor, GitLab,
// Artifactory): a request without a valid token gets a Bearer challenge naming
// the realm, /token here, which gives a token for the user and password.
func tokenAuth(next http.Handler, user, pass string) http.Handler {
	var mu sync.Mutex
	tokens := map[string]bool{}
	issue := basicAuth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b := make([]byte, 16)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		t := hex.EncodeToString(b)
		mu.Lock()
		tokens[t] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"token":%q,"access_token":%q,"expires_in":3600}`, t, t)
	}), user, pass)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			issue.ServeHTTP(w, r)
			return
		}
		t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		mu.Lock()
		ok = ok && tokens[t]
		mu.Unlock()
		if !ok {
			scheme := "http"
			if r.TLS != nil {
				scheme = "https"
			}
			refuse(w, fmt.Sprintf(`Bearer realm="%s://%s/token",service="watchdog-test-registry"`, scheme, r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refuse answers 401 with the challenge a client answers with its credentials.
func refuse(w http.ResponseWriter, challenge string) {
	w.Header().Set("WWW-Authenticate", challenge)
	http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
}
