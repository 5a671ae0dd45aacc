package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

var upstreamTLS = flag.Bool("upstream-tls", false, "serve the simulated providers over TLS, where both proxies negotiate HTTP/2 as they do with real providers (a certificate made for the run, trusted by both); every mode of the comparison (the clouds' and the translating ones included; not with the direct configuration), and -idle-streams")

// upstream is the TLS of the simulated providers when -upstream-tls is
// set: the servers' config and the PEM file both proxies trust.
var upstream struct {
	server *tls.Config
	caFile string
}

// setupUpstreamTLS makes a self-signed certificate for 127.0.0.1, valid
// for a day, and writes it to dir for the proxies' trust settings
// (llm_hedge's tls_trusted_ca, reverse_proxy's tls_trust_pool file).
func setupUpstreamTLS(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "llm-hedge bench provider"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return err
	}
	upstream.caFile = filepath.Join(dir, "provider-ca.pem")
	if err := os.WriteFile(upstream.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	upstream.server = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	}
	return nil
}

// checkUpstreamTLS rejects the configurations -upstream-tls does not
// cover: direct (the load generator speaks cleartext HTTP/1.1 only).
func checkUpstreamTLS(configs []string) error {
	if slices.Contains(configs, "direct") {
		return fmt.Errorf("-upstream-tls measures the proxies, not direct: leave it out of -configs")
	}
	return nil
}

// rpUpstreamTLS is reverse_proxy's transport line trusting the
// providers' certificate; "" without -upstream-tls.
func rpUpstreamTLS() string {
	if upstream.server == nil {
		return ""
	}
	return "\t\t\ttls_trust_pool file " + upstream.caFile + "\n"
}

// hedgeUpstreamTLS is a provider block's trust line; "" without
// -upstream-tls.
func hedgeUpstreamTLS() string {
	if upstream.server == nil {
		return ""
	}
	return "\t\t\ttls_trusted_ca " + upstream.caFile + "\n"
}
