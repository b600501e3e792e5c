package e2e

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"maps"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

	"github.com/tollgate/tollgate/authz/decision"
	"github.com/tollgate/tollgate/cmd/tollgate/cli"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
)

var grpcAddrRE = regexp.MustCompile(`"grpc":"([^"]+)"`)

// grpcAddr is the address of the gRPC server for Envoy, from the log.
func (tg *tollgate) grpcAddr(t testing.TB) string {
	t.Helper()
	m := grpcAddrRE.FindStringSubmatch(tg.logs.String())
	require.NotNil(t, m, "no gRPC address in the log")
	return m[1]
}

// makeCerts runs tollgate certs into dir.
func makeCerts(t testing.TB, dir string, force bool) {
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
	if withCert {
		return tlsClientWith(t, addr, dir, filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	}
	return tlsClientWith(t, addr, dir, "", "")
}

// tlsClientWith dials the gRPC server with the CA of dir, presenting the
// given client certificate (none when certFile is empty).
func tlsClientWith(t *testing.T, addr, dir, certFile, keyFile string) *grpc.ClientConn {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(caPEM))
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{cert}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// grpcConn dials tg's gRPC server as a process on the same host would: in
// plaintext, or behind Envoy (where the port takes mutual TLS only) with
// the client certificate the harness made for Envoy. Closed with the test.
func (tg *tollgate) grpcConn(t *testing.T) *grpc.ClientConn {
	t.Helper()
	if tg.certs != "" {
		return tlsClient(t, tg.grpcAddr(t), tg.certs, true)
	}
	conn, err := grpc.NewClient(tg.grpcAddr(t), grpc.WithTransportCredentials(insecure.NewCredentials()))
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
	t.Parallel()
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
	t.Parallel()
	certs := t.TempDir()
	makeCerts(t, certs, false)
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "",
		"--grpc-tls-cert", filepath.Join(certs, "server.pem"), "--grpc-tls-key", filepath.Join(certs, "server-key.pem"),
		"--grpc-client-ca", filepath.Join(certs, "ca.pem"), "--grpc-client-san", "envoy")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")
	addr := tg.grpcAddr(t)

	assert.Error(t, check(tlsClient(t, addr, certs, false)), "no client certificate, no call")
	good := tlsClient(t, addr, certs, true)
	require.NoError(t, check(good), "a client certificate from the CA, naming envoy, may call")
	intruderCert, intruderKey := clientCert(t, certs, "intruder")
	assert.Error(t, check(tlsClientWith(t, addr, certs, intruderCert, intruderKey)),
		"a client certificate from the same CA for another name is refused")
	assert.Contains(t, tg.logs.String(), "gRPC client certificate refused")

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
	t.Parallel()
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

// clientCert makes a client certificate for name (its DNS SAN and common
// name), signed by the CA tollgate certs wrote into dir.
func clientCert(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	require.NoError(t, err)
	block, _ := pem.Decode(caPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	caKeyPEM, err := os.ReadFile(filepath.Join(dir, "ca-key.pem"))
	require.NoError(t, err)
	block, _ = pem.Decode(caKeyPEM)
	caKey, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(t.TempDir(), name+".pem"), filepath.Join(t.TempDir(), name+"-key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// hostileCaller calls the gRPC port directly, as any process that reaches
// it might: ext_authz with a key of its own, and either ext_proc step.
type hostileCaller struct {
	conn *grpc.ClientConn
}

// decide asks ext_authz to admit a request with secret and returns the
// decision it signed.
func (h hostileCaller) decide(t *testing.T, secret, requestID string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := authv3.NewAuthorizationClient(h.conn).Check(ctx, &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: "127.0.0.1"}}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Method: "POST", Path: contract.PathChatCompletions, Headers: map[string]string{
				"authorization": "Bearer " + secret, contract.HeaderRequestID: requestID,
				contract.HeaderDecision: "v1.made-up.by-the-client",
			},
		}},
	}})
	require.NoError(t, err)
	for _, hv := range resp.GetOkResponse().GetHeaders() {
		if hv.GetHeader().GetKey() == contract.HeaderDecision {
			require.NotEqual(t, "v1.made-up.by-the-client", hv.GetHeader().GetValue())
			return hv.GetHeader().GetValue()
		}
	}
	t.Fatalf("ext_authz admitted the request without a decision: %v", resp)
	return ""
}

// open starts a stream of the given ext_proc step, ended with the test.
func (h hostileCaller) open(t *testing.T, step string) extprocv3.ExternalProcessor_ProcessClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(t.Context(), contract.HeaderStep, step), 10*time.Second)
	t.Cleanup(cancel)
	stream, err := extprocv3.NewExternalProcessorClient(h.conn).Process(ctx)
	require.NoError(t, err)
	return stream
}

func exchangeOn(t *testing.T, s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	t.Helper()
	require.NoError(t, s.Send(req))
	resp, err := s.Recv()
	require.NoError(t, err)
	return resp
}

// router runs a router step for a chat request with the given request id
// and extra headers (name, value, …): its answer to the headers, and when
// they pass, to the body.
func (h hostileCaller) router(t *testing.T, requestID string, extra ...string) *extprocv3.ProcessingResponse {
	t.Helper()
	hs := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte(contract.PathChatCompletions)},
		{Key: ":authority", RawValue: []byte("tollgate")}, {Key: "content-type", RawValue: []byte("application/json")},
		{Key: contract.HeaderRequestID, RawValue: []byte(requestID)},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hs = append(hs, &corev3.HeaderValue{Key: extra[i], RawValue: []byte(extra[i+1])})
	}
	s := h.open(t, contract.StepRouter)
	resp := exchangeOn(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}}}})
	if resp.GetImmediateResponse() != nil {
		return resp
	}
	return exchangeOn(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(helloBody), EndOfStream: true}}})
}

// upstream runs an upstream step for the deployment of gpt-4o-mini with
// the given request metadata: its answers to the headers and to the body
// (sent whatever the first answer was).
func (h hostileCaller) upstream(t *testing.T, fields map[string]*structpb.Value) []*extprocv3.ProcessingResponse {
	t.Helper()
	s := h.open(t, contract.StepUpstream)
	first := exchangeOn(t, s, &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}}},
		Attributes: map[string]*structpb.Struct{contract.AttributesNamespace: {Fields: map[string]*structpb.Value{
			contract.AttrDeployment: structpb.NewStringValue(config.DeploymentID("gpt-4o-mini", "openai", "gpt-4o-mini-2024-07-18")),
		}}},
		MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{contract.RequestMetadataNamespace: {Fields: fields}}},
	})
	second := exchangeOn(t, s, &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(helloBody), EndOfStream: true}}})
	return []*extprocv3.ProcessingResponse{first, second}
}

// refused asserts an ext_proc answer is an immediate 500 that sets no
// provider credential and hands on no request metadata.
func refused(t *testing.T, resp *extprocv3.ProcessingResponse, what string) {
	t.Helper()
	imm := resp.GetImmediateResponse()
	require.NotNil(t, imm, "%s: refused with an immediate response: %v", what, resp)
	assert.EqualValues(t, 500, imm.GetStatus().GetCode(), what)
	assert.Contains(t, string(imm.GetBody()), `"code":"internal_error"`, what)
	assert.Nil(t, resp.GetDynamicMetadata(), "%s: no request metadata, no step token", what)
	assert.NotContains(t, resp.String(), "sk-provider-secret", what)
}

// withPayload is a decision whose signed part is replaced by another
// identity, the signature kept.
func withPayload(signed, keyID, accountID, requestID string) string {
	parts := strings.Split(signed, ".")
	raw := fmt.Sprintf("%d:%s;%d:%s;%d:%s;%d", len(keyID), keyID, len(accountID), accountID, len(requestID), requestID,
		time.Now().Add(time.Minute).Unix())
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(raw)) + "." + parts[2]
}

func (tg *tollgate) accountID(t *testing.T, email string) string {
	t.Helper()
	a, err := tg.Store.AccountByEmail(t.Context(), email)
	require.NoError(t, err)
	return a.ID
}

// A process that reaches the gRPC port (here in plaintext on loopback, or
// behind Envoy, where the port takes mutual TLS only, as a holder of a
// client certificate; a mesh workload alike) and holds a key
// of its own cannot act as another key or account, through any door:
// every forged, altered, expired or replayed decision and every altered or
// minted step token is refused, nothing reaches the provider and nothing
// is charged to the victim.
func TestAHostileGRPCCallerCannotActAsAnotherAccount(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	victimSecret := tg.newAccount(t, "victim@example.com", "10")
	victimKey, victimAcct := tg.onlyKeyID(t, "victim@example.com"), tg.accountID(t, "victim@example.com")
	mySecret := tg.newAccount(t, "me@example.com", "10")
	myKey, myAcct := tg.onlyKeyID(t, "me@example.com"), tg.accountID(t, "me@example.com")
	h := hostileCaller{conn: tg.grpcConn(t)}

	mine := h.decide(t, mySecret, "atk-1")
	captured := h.decide(t, victimSecret, "victim-1") // as if read off the wire
	// The replicas' key signs the two cases a caller without it could not
	// make: a decision past its expiry, and one pairing a key with another
	// account.
	shared, err := tg.Store.SharedSecret(t.Context(), "ext_proc step key", []byte("serve stored one already"))
	require.NoError(t, err)
	require.NotEqual(t, "serve stored one already", string(shared))
	k := decision.NewKey(shared)
	expired := k.Sign(decision.Decision{KeyID: victimKey, AccountID: victimAcct, RequestID: "victim-2", Expires: time.Now().Add(-time.Second)})
	mismatched := k.Sign(decision.Decision{KeyID: myKey, AccountID: victimAcct, RequestID: "atk-3", Expires: time.Now().Add(time.Minute)})

	for _, tc := range []struct {
		name, requestID string
		headers         []string
	}{
		{"no decision, the victim's identity headers", "atk-2", []string{contract.HeaderKeyID, victimKey, contract.HeaderAccountID, victimAcct}},
		{"my decision on another request", "atk-2", []string{contract.HeaderDecision, mine, contract.HeaderKeyID, victimKey, contract.HeaderAccountID, victimAcct}},
		{"a captured decision replayed on another request", "atk-4", []string{contract.HeaderDecision, captured}},
		{"my decision altered to name the victim", "atk-1", []string{contract.HeaderDecision, withPayload(mine, victimKey, victimAcct, "atk-1")}},
		{"my decision altered to name the victim's account", "atk-1", []string{contract.HeaderDecision, withPayload(mine, myKey, victimAcct, "atk-1")}},
		{"an expired decision", "victim-2", []string{contract.HeaderDecision, expired}},
		{"a decision for a key of another account", "atk-3", []string{contract.HeaderDecision, mismatched}},
		{"a made-up decision", "atk-5", []string{contract.HeaderDecision, "v1.bm9wZQ.bm9wZQ"}},
	} {
		refused(t, h.router(t, tc.requestID, tc.headers...), "router step: "+tc.name)
	}

	// A genuine step token, from a router step run with my own decision...
	resp := h.router(t, "atk-1", contract.HeaderDecision, mine)
	require.Nil(t, resp.GetImmediateResponse(), "my own decision admits my own request: %v", resp)
	meta := resp.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()
	require.Equal(t, myAcct, meta[contract.MetaAccountID].GetStringValue())
	require.NotEmpty(t, meta[contract.MetaToken].GetStringValue())
	// ...altered, moved to another request, extended, or minted.
	for name, change := range map[string]func(map[string]*structpb.Value){
		"the victim's account": func(f map[string]*structpb.Value) { f[contract.MetaAccountID] = structpb.NewStringValue(victimAcct) },
		"the victim's key":     func(f map[string]*structpb.Value) { f[contract.MetaKeyID] = structpb.NewStringValue(victimKey) },
		"another request":      func(f map[string]*structpb.Value) { f[contract.MetaRequestID] = structpb.NewStringValue("another") },
		"a later expiry": func(f map[string]*structpb.Value) {
			f[contract.MetaExpires] = structpb.NewNumberValue(float64(time.Now().Add(time.Hour).Unix()))
		},
		"another model":  func(f map[string]*structpb.Value) { f[contract.MetaModel] = structpb.NewStringValue("gpt-4o") },
		"a minted token": func(f map[string]*structpb.Value) { f[contract.MetaToken] = structpb.NewStringValue("bm90LWEtdG9rZW4") },
		"no token":       func(f map[string]*structpb.Value) { delete(f, contract.MetaToken) },
		"a token past its expiry": func(f map[string]*structpb.Value) {
			f[contract.MetaExpires] = structpb.NewNumberValue(float64(time.Now().Add(-time.Second).Unix()))
		},
	} {
		fields := maps.Clone(meta)
		change(fields)
		for i, resp := range h.upstream(t, fields) {
			refused(t, resp, fmt.Sprintf("upstream step, %s, message %d", name, i+1))
		}
	}

	assert.Empty(t, p.received(), "nothing reached the provider")
	assert.Empty(t, tg.usageRecords(t, victimKey), "nothing recorded against the victim's key")
	assert.Equal(t, 10*money.PerDollar, tg.balance(t, "victim@example.com"), "nothing charged to the victim")
	assert.NotContains(t, tg.logs.String(), mine, "no decision is logged")

	// Through the edge, ext_authz's decision reaches the router step.
	resp2, body := tg.post(t, victimSecret, helloBody)
	require.Equal(t, 200, resp2.StatusCode, "%s", body)
	assert.Len(t, p.received(), 1)
}
