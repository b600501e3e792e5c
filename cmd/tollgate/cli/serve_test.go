package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const serveTestConfig = `
providers:
  - {name: openai, type: openai, base_url: "http://127.0.0.1:1/v1", api_key: "sk-test"}
models:
  - id: gpt-4o-mini
    max_tokens: 100
    deployments: [{provider: openai, model: gpt-4o-mini}]
plans: [{name: default, models: ["*"]}]
`

// A --listen address that cannot be bound ends serve with an error naming
// the flag, and nothing else: no gRPC listener was asked for, and none is
// closed.
func TestServeReportsAListenAddressInUseWithoutAGRPCListener(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(serveTestConfig), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, logs bytes.Buffer
	err = Run(ctx, []string{"serve", "--config", cfg, "--db", "sqlite://" + filepath.Join(dir, "t.db"),
		"--listen", taken.Addr().String(), "--admin-listen", ""}, &out, &logs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--listen")
}
