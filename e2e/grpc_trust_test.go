package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/cmd/tollgate/cli"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
)

var grpcAddrRE = regexp.MustCompile(`"grpc":"([^"]+)"`)

// grpcAddr is the address of the gRPC server for Envoy, from the log.
func (tg *tollgate) grpcAddr(t *testing.T) string {
	t.Helper()
	m := grpcAddrRE.FindStringSubmatch(tg.logs.String())
	require.NotNil(t, m, "no gRPC address in the log")
	return m[1]
}

// makeCerts runs tollgate certs into dir.
func makeCerts(t *testing.T, dir string, force bool) {
	t.Helper()
	args := []string{"certs", "--out", dir}
	if force {
		args = append(args, "--force")
	}
	var out bytes.Buffer
	require.NoError(t, cli.Run(context.Background(), args, &out, &out), out.String())
}

// tlsClient dials the gRPC server with the CA of dir, presenting dir's
// client certificate when withCert.
func tlsClient(t *testing.T, addr, dir string, withCert bool) *grpc.ClientConn {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if withCert {
		cert, err := tls.LoadX509KeyPair(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

func check(conn *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := authv3.NewAuthorizationClient(conn).Check(ctx, &authv3.CheckRequest{})
	return err
}

func TestPlaintextGRPCOffLoopbackRefusesToStart(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(configFor("http://127.0.0.1:1")), 0o600))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := cli.Run(ctx, []string{"serve", "--config", cfg, "--db", "sqlite://" + filepath.Join(dir, "t.db"),
		"--listen", "127.0.0.1:0", "--grpc-listen", "0.0.0.0:0"}, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--grpc-tls-cert")
}

// The gRPC port serves provider credentials to whoever may run an upstream
// step: it takes only callers with a client certificate from the CA, and
// even they cannot run an upstream step the router step did not admit.
func TestTheGRPCPortTrustsOnlyClientCertificatesAndTheRouterStepsToken(t *testing.T) {
	certs := t.TempDir()
	makeCerts(t, certs, false)
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "",
		"--grpc-tls-cert", filepath.Join(certs, "server.pem"), "--grpc-tls-key", filepath.Join(certs, "server-key.pem"),
		"--grpc-client-ca", filepath.Join(certs, "ca.pem"))
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")
	addr := tg.grpcAddr(t)

	assert.Error(t, check(tlsClient(t, addr, certs, false)), "no client certificate, no call")
	good := tlsClient(t, addr, certs, true)
	require.NoError(t, check(good), "a client certificate from the CA may call")

	// A forged upstream step: genuine-looking metadata for a deployment,
	// without (or with a made-up) router-step token.
	account := tg.run(t, "account", "show", "--email", "me@example.com", "--json")
	acct := regexp.MustCompile(`"id": "([^"]+)"`).FindStringSubmatch(account)[1]
	for _, token := range []string{"", "bm90LWEtdG9rZW4"} {
		fields := map[string]*structpb.Value{
			contract.MetaKeyID: structpb.NewStringValue(keyID), contract.MetaAccountID: structpb.NewStringValue(acct),
			contract.MetaRequestID: structpb.NewStringValue("forged"), contract.MetaModel: structpb.NewStringValue("gpt-4o-mini"),
			contract.MetaExpires: structpb.NewNumberValue(float64(time.Now().Add(time.Hour).Unix())),
		}
		if token != "" {
			fields[contract.MetaToken] = structpb.NewStringValue(token)
		}
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), contract.HeaderStep, contract.StepUpstream), 10*time.Second)
		stream, err := extprocv3.NewExternalProcessorClient(good).Process(ctx)
		require.NoError(t, err)
		require.NoError(t, stream.Send(&extprocv3.ProcessingRequest{
			Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}}},
			Attributes: map[string]*structpb.Struct{contract.AttributesNamespace: {Fields: map[string]*structpb.Value{
				contract.AttrDeployment: structpb.NewStringValue(config.DeploymentID("gpt-4o-mini", "openai", "gpt-4o-mini-2024-07-18")),
			}}},
			MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{contract.RequestMetadataNamespace: {Fields: fields}}},
		}))
		resp, err := stream.Recv()
		require.NoError(t, err)
		imm := resp.GetImmediateResponse()
		require.NotNil(t, imm, "refused with an immediate response, not a credential")
		assert.EqualValues(t, 500, imm.GetStatus().GetCode())
		for _, h := range imm.GetHeaders().GetSetHeaders() {
			assert.NotContains(t, string(h.GetHeader().GetRawValue()), "sk-provider-secret")
		}
		cancel()
	}

	// The built-in edge reaches the same servers in-process, TLS or not.
	resp, body := tg.post(t, secret, helloBody)
	require.Equal(t, 200, resp.StatusCode, body)
	assert.Len(t, p.received(), 1, "only the real request reached the provider")

	// New certificates replace the old without a restart.
	makeCerts(t, certs, true)
	waitFor(t, 15*time.Second, 100*time.Millisecond, func() bool {
		return check(tlsClient(t, addr, certs, true)) == nil
	}, "the new certificates are served")
}

// TestEdgeOffServesTheDashboardAndLeavesTheAPIToEnvoy: behind Envoy the
// built-in edge is off (--edge off): the HTTP listener serves the
// dashboard, /v1/ is a 404 in the error shape, and the gRPC server Envoy
// calls still answers ext_authz.
func TestEdgeOffServesTheDashboardAndLeavesTheAPIToEnvoy(t *testing.T) {
	p := newMockProvider(t, "openai")
	tg := startTollgate(t, configFor(p.URL), "", "--edge", "off")
	// Tollgate's own listener (behind Envoy, tg.BaseURL is Envoy's).
	resp, err := http.Get(tg.Listener + "/v1/models")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusNotFound, resp.StatusCode, "%s", body)
	require.Contains(t, string(body), `"code":"not_found"`)
	require.Contains(t, string(body), "--edge off")
	dash := tg.Listener + "/login"
	resp, err = http.Get(dash)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "the dashboard is served")

	var conn *grpc.ClientConn
	if tg.certs != "" { // behind Envoy, the gRPC port takes mutual TLS only
		conn = tlsClient(t, tg.grpcAddr(t), tg.certs, true)
	} else {
		conn, err = grpc.NewClient(tg.grpcAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(t, err)
		defer conn.Close()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	check, err := authv3.NewAuthorizationClient(conn).Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "POST", Path: "/v1/chat/completions", Headers: map[string]string{"authorization": "Bearer tg_sk_nope"},
		}},
	}})
	require.NoError(t, err)
	require.Equal(t, int32(codes.PermissionDenied), check.GetStatus().GetCode(), "ext_authz answers Envoy: %v", check)
	require.Contains(t, check.GetDeniedResponse().GetBody(), "invalid_api_key")
}
