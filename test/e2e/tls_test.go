package e2e

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentenv/watchdog/internal/testenv"
)

// The chart takes only https:// receivers, verified against the image's CA bundle.
// The tests' receivers serve with a certificate of a test CA, and the image the
// tests build carries the machine's bundle plus that CA (`hack/release binary-image
// --ca-bundle`), as an image built for a company CA would.
var (
	testTLSOnce sync.Once
	testTLS     struct {
		server *tls.Config
		bundle string // the image's CA bundle: the machine's and the test CA
		err    error
	}
)

// receiverTLS is the receivers' TLS configuration and the CA bundle file that
// trusts it; made once per test binary, for the bridge's host address.
func receiverTLS(dir string) (*tls.Config, string, error) {
	testTLSOnce.Do(func() {
		testTLS.server, testTLS.bundle, testTLS.err = makeReceiverTLS(dir)
	})
	return testTLS.server, testTLS.bundle, testTLS.err
}

func makeReceiverTLS(dir string) (*tls.Config, string, error) {
	caPEM, certPEM, keyPEM, err := testenv.TestCA("watchdog e2e receiver", net.ParseIP(cluster.HostIP))
	if err != nil {
		return nil, "", err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, "", err
	}
	system, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		return nil, "", err
	}
	bundle := filepath.Join(dir, "ca-bundle.crt")
	if err := os.WriteFile(bundle, append(system, caPEM...), 0o644); err != nil {
		return nil, "", err
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}, bundle, nil
}
