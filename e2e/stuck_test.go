package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/envoy/contract"
)

// TestAStuckTollgateGetsEveryClientEnvoysTimeoutInItsShape: when the
// router step never answers (a relay in front of Tollgate's gRPC port
// holds the step's stream; ext_authz and xDS pass), Envoy gives up after
// its message timeout and each client gets a 504 in its API's shape,
// naming the request id — never an empty body — and nothing reaches a
// provider. (A slow database gets the step's own 503 well before: see
// extproc's TestAStalledBudgetHoldAnswersARetryableRefusalBeforeTheProxysTimeout.)
func TestAStuckTollgateGetsEveryClientEnvoysTimeoutInItsShape(t *testing.T) {
	t.Parallel()
	requireEnvoy(t)
	p := newMockOpenAI(t)
	certs := t.TempDir()
	makeCerts(t, certs, false)
	tg := serve(t, configFor(p.URL), "", "--edge", "off", "--envoy-listen", "127.0.0.1:0",
		"--grpc-tls-cert", filepath.Join(certs, "server.pem"), "--grpc-tls-key", filepath.Join(certs, "server-key.pem"),
		"--grpc-client-ca", filepath.Join(certs, "ca.pem"))
	tg.certs = certs
	relay := startStallingRelay(t, tg.grpcAddr(t), certs)
	tg.envoy = launchEnvoy(t, certs, []string{relay}, []string{strings.TrimPrefix(tg.Listener, "http://")})
	require.NoError(t, tg.envoy.Ready(context.Background(), 30*time.Second), "envoy logs:\n%s", tg.envoy.logs.String())
	tg.BaseURL = tg.envoy.Listener + "/v1"
	secret := tg.newAccount(t, "stuck@example.com", "10")

	var wg sync.WaitGroup
	wg.Go(func() {
		resp, body := tg.post(t, secret, helloBody)
		assert.Equal(t, http.StatusGatewayTimeout, resp.StatusCode, "%s", body)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		requireSchema(t, schemaError, body)
		assert.Equal(t, "timeout", gjson.GetBytes(body, "error.code").String(), "%s", body)
		assert.Equal(t, "server_error", gjson.GetBytes(body, "error.type").String(), "%s", body)
		assert.Equal(t, "Tollgate did not answer in time; please retry. (request id: "+resp.Header.Get("X-Request-Id")+")",
			gjson.GetBytes(body, "error.message").String())
	})
	wg.Go(func() {
		status, body, header := postMessages(t, tg, secret, "/messages",
			`{"model":"gpt-4o-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`)
		assert.Equal(t, http.StatusGatewayTimeout, status, body)
		assert.Equal(t, "error", gjson.Get(body, "type").Str, body)
		assert.Equal(t, "timeout_error", gjson.Get(body, "error.type").Str, body)
		assert.Equal(t, "timeout: Tollgate did not answer in time; please retry. (request id: "+header.Get("X-Request-Id")+")",
			gjson.Get(body, "error.message").Str)
	})
	wg.Wait()
	assert.Empty(t, p.received(), "nothing reached the provider")
}

// startStallingRelay serves, with the server certificate of certs, a
// gRPC relay to Tollgate's port at backend: every call goes through
// unchanged (xDS, ext_authz, health checks, the upstream step) but the
// router step's ext_proc stream, which it holds unanswered until the
// caller gives up. It returns the relay's address.
func startStallingRelay(t *testing.T, backend, certs string) string {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "server.pem"), filepath.Join(certs, "server-key.pem"))
	require.NoError(t, err)
	caPEM, err := os.ReadFile(filepath.Join(certs, "ca.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	creds := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12})
	upstream := tlsClient(t, backend, certs, true)

	srv := grpc.NewServer(grpc.Creds(creds), grpc.ForceServerCodec(rawCodec{}),
		grpc.UnknownServiceHandler(func(_ any, in grpc.ServerStream) error {
			method, _ := grpc.MethodFromServerStream(in)
			md, _ := metadata.FromIncomingContext(in.Context())
			if method == "/envoy.service.ext_proc.v3.ExternalProcessor/Process" && slices.ContainsFunc(md.Get(contract.HeaderStep), func(step string) bool {
				return step == contract.StepRouter || step == contract.StepRouterDirect
			}) {
				<-in.Context().Done() // stuck
				return in.Context().Err()
			}
			return relayStream(in, upstream, method, md)
		}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

// relayStream copies one call both ways between in and a new stream of
// method on conn, with in's metadata, headers and trailers.
func relayStream(in grpc.ServerStream, conn *grpc.ClientConn, method string, md metadata.MD) error {
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(in.Context(), md.Copy()))
	defer cancel()
	out, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodec(rawCodec{}))
	if err != nil {
		return err
	}
	go func() {
		for {
			var m []byte
			if err := in.RecvMsg(&m); err != nil {
				_ = out.CloseSend()
				return
			}
			if err := out.SendMsg(&m); err != nil {
				return
			}
		}
	}()
	first := true
	for {
		var m []byte
		err := out.RecvMsg(&m)
		if first {
			if h, herr := out.Header(); herr == nil {
				_ = in.SendHeader(h)
			}
			first = false
		}
		if err != nil {
			in.SetTrailer(out.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := in.SendMsg(&m); err != nil {
			return err
		}
	}
}

// rawCodec passes messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }
