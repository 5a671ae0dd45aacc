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
	"time"
)

var upstreamTLS = flag.Bool("upstream-tls", false, "serve the simulated providers over TLS, where both proxies negotiate HTTP/2 as they do with real providers (a certificate made for the run, trusted by both); the comparison's non-stream, stream, openai-stream, responses-stream and gemini-stream modes, and -idle-streams")

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

// checkUpstreamTLS rejects the modes -upstream-tls does not cover.
func checkUpstreamTLS(modes []string) error {
	for _, m := range modes {
		if bm := benchModes[m]; bm.translate != "" || m == "bedrock-stream" {
			return fmt.Errorf("-upstream-tls covers non-stream, stream, openai-stream, responses-stream and gemini-stream, not %s", m)
		}
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
