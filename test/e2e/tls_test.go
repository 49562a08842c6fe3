package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// The chart takes only https:// receivers, verified against the image's CA bundle.
// The tests' receivers serve with a certificate of a test CA, and the image the
// tests build carries the machine's bundle plus that CA (`hack/release image
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
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "watchdog e2e receivers CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, "", err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, "", err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "watchdog e2e receiver"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IPAddresses: []net.IP{net.ParseIP(cluster.HostIP)},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, "", err
	}
	system, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		return nil, "", err
	}
	bundle := filepath.Join(dir, "ca-bundle.crt")
	if err := os.WriteFile(bundle, append(system, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...), 0o644); err != nil {
		return nil, "", err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	return cfg, bundle, nil
}
