package helm_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var (
	pemOnce  sync.Once
	pemFiles map[string][]byte
	pemErr   error
)

// testPEM returns a file of a self-signed certificate, its key and itself
// as the CA, under the names envoy.yaml reads.
func testPEM(t *testing.T, name string) []byte {
	t.Helper()
	pemOnce.Do(func() {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			pemErr = err
			return
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "envoy"}, DNSNames: []string{"envoy"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IsCA: true, BasicConstraintsValid: true,
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			pemErr = err
			return
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			pemErr = err
			return
		}
		cert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		pemFiles = map[string][]byte{
			"client.pem":     cert,
			"ca.pem":         cert,
			"client-key.pem": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}),
		}
	})
	require.NoError(t, pemErr)
	require.Contains(t, pemFiles, name)
	return pemFiles[name]
}
