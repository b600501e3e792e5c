package cli

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCertsMakesAClientCertificateNamedEnvoy(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), []string{"certs", "--out", dir}, &out, &out), out.String())
	assert.Contains(t, out.String(), "--grpc-client-san envoy")
	raw, err := os.ReadFile(filepath.Join(dir, certClient))
	require.NoError(t, err)
	block, _ := pem.Decode(raw)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	assert.Equal(t, []string{"envoy"}, c.DNSNames)
}
