package app

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAClientCertificateMustNameAnAllowedSAN(t *testing.T) {
	spiffe, err := url.Parse("spiffe://cluster.local/ns/gw/sa/envoy")
	require.NoError(t, err)
	cert := &x509.Certificate{DNSNames: []string{"Envoy.internal"}, URIs: []*url.URL{spiffe},
		IPAddresses: []net.IP{net.ParseIP("10.0.0.7")}, EmailAddresses: []string{"gw@example.com"}}
	cert.Subject.CommonName = "admin"
	for name, tc := range map[string]struct {
		allowed []string
		want    bool
	}{
		"a DNS name, in any case": {[]string{"envoy.internal"}, true},
		"a URI (SPIFFE id)":       {[]string{"spiffe://cluster.local/ns/gw/sa/envoy"}, true},
		"an IP address":           {[]string{"10.0.0.7"}, true},
		"an email address":        {[]string{"gw@example.com"}, true},
		"one of several":          {[]string{"other", "envoy.internal"}, true},
		"another name":            {[]string{"envoy"}, false},
		"another SPIFFE id":       {[]string{"spiffe://cluster.local/ns/gw/sa/other"}, false},
		"the common name":         {[]string{"admin"}, false},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, tc.want, certNames(cert, tc.allowed))
			r := &certReloader{sans: tc.allowed}
			err := r.verifyClient(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}})
			assert.Equal(t, tc.want, err == nil, "%v", err)
		})
	}
	assert.NoError(t, (&certReloader{}).verifyClient(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}),
		"no --grpc-client-san: any certificate the CA signed")
}

func TestClientSANsNeedMutualTLS(t *testing.T) {
	g := GRPCListen{Addr: "127.0.0.1:0", ClientSANs: []string{"envoy"}}
	_, _, err := g.listen(nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--grpc-client-san needs mutual TLS")
}
