package cli

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Files tollgate certs writes into --out.
const (
	certCA         = "ca.pem"
	certCAKey      = "ca-key.pem"
	certServer     = "server.pem"
	certServerKey  = "server-key.pem"
	certClient     = "client.pem"
	certClientKey  = "client-key.pem"
	certsLifetime  = 2 * 365 * 24 * time.Hour
	certClientName = "envoy" // the client certificate's DNS SAN
	defaultSANList = "tollgate,localhost,127.0.0.1,::1"
)

// runCerts makes a local CA and two leaf certificates for mutual TLS
// between Envoy and Tollgate's gRPC server: server.pem for
// `tollgate serve --grpc-tls-cert`, client.pem for Envoy's tollgate_grpc
// cluster (DNS SAN "envoy", for --grpc-client-san envoy), both signed by
// ca.pem (the --grpc-client-ca, and Envoy's trusted CA).
func runCerts(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("certs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "certs", "directory to write the CA and the certificates into")
	hosts := fs.String("hosts", defaultSANList, "comma-separated names and addresses the server certificate is valid for")
	force := fs.Bool("force", false, "overwrite existing files")
	if err := parseInterleaved(fs, args); err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if !*force {
		for _, f := range []string{certCA, certCAKey, certServer, certServerKey, certClient, certClientKey} {
			if _, err := os.Stat(filepath.Join(*out, f)); err == nil {
				return fmt.Errorf("certs: %s exists; give --force to replace it", filepath.Join(*out, f))
			}
		}
	}
	if err := makeCerts(*out, *hosts, time.Now()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s, %s (for tollgate serve --grpc-tls-cert/--grpc-tls-key, --grpc-client-ca %s, --grpc-client-san %s) and %s, %s (for Envoy) into %s\n",
		certServer, certServerKey, certCA, certClientName, certClient, certClientKey, *out)
	return nil
}

// makeCerts writes into dir a CA valid from now and the server and client
// certificates it signs, the server's for hosts (comma-separated names and
// addresses).
func makeCerts(dir, hosts string, now time.Time) error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Tollgate local CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certsLifetime),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("certs: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return fmt.Errorf("certs: CA: %w", err)
	}
	if err := writeCert(dir, certCA, certCAKey, caDER, caKey); err != nil {
		return err
	}
	dns, ips := splitHosts(hosts)
	for _, leaf := range []struct {
		cert, key, cn string
		usage         x509.ExtKeyUsage
	}{
		{certServer, certServerKey, "tollgate", x509.ExtKeyUsageServerAuth},
		{certClient, certClientKey, certClientName, x509.ExtKeyUsageClientAuth},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("certs: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: leaf.cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(certsLifetime),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{leaf.usage},
		}
		if leaf.usage == x509.ExtKeyUsageServerAuth {
			tmpl.DNSNames, tmpl.IPAddresses = dns, ips
		} else {
			// The name tollgate serve --grpc-client-san checks.
			tmpl.DNSNames = []string{certClientName}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("certs: %s: %w", leaf.cert, err)
		}
		if err := writeCert(dir, leaf.cert, leaf.key, der, key); err != nil {
			return err
		}
	}
	return nil
}

// splitHosts separates a comma-separated list into DNS names and IP
// addresses.
func splitHosts(hosts string) ([]string, []net.IP) {
	var dns []string
	var ips []net.IP
	for _, h := range strings.Split(hosts, ",") {
		h = strings.TrimSpace(h)
		switch ip := net.ParseIP(h); {
		case h == "":
		case ip != nil:
			ips = append(ips, ip)
		default:
			dns = append(dns, h)
		}
	}
	return dns, ips
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

// writeCert writes a certificate (0644) and its private key (0600).
func writeCert(dir, certName, keyName string, der []byte, key *ecdsa.PrivateKey) error {
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, certName), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, keyName), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}
