package extproc

import (
	"context"
	"net"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/store"
)

type nopUsage struct{}

func (nopUsage) Record(store.UsageRecord) error { return nil }

type noKeys struct{}

func (noKeys) KeyByID(context.Context, string) (store.Key, error) {
	return store.Key{}, store.ErrNotFound
}
func (noKeys) Account(context.Context, string) (store.Account, error) {
	return store.Account{}, store.ErrNotFound
}

// startServer serves the ext_proc steps over gRPC on loopback (no keys, no
// usage store) until the test ends, and returns a client of them.
func startServer(t *testing.T) extprocv3.ExternalProcessorClient {
	t.Helper()
	cfg := testCfg(t)
	srv := grpc.NewServer()
	extprocv3.RegisterExternalProcessorServer(srv, New(Options{Config: func() *config.Config { return cfg }, Keys: noKeys{}, Usage: nopUsage{}}))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return extprocv3.NewExternalProcessorClient(conn)
}

// Whatever order of messages a proxy sends, each step answers every message
// and never brings the server down.
func TestOutOfOrderMessagesGetAnswersNotCrashes(t *testing.T) {
	client := startServer(t)

	headers := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}}}}
	body := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte(`{}`), EndOfStream: true}}}
	respHeaders := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{}}}}
	respBody := &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{ResponseBody: &extprocv3.HttpBody{Body: []byte("x")}}}
	sequences := map[string][]*extprocv3.ProcessingRequest{
		"body first":               {body, respHeaders, respBody},
		"headers without metadata": {headers, body, respHeaders, respBody},
		"response before request":  {respHeaders, respBody},
		"response body alone":      {respBody},
		"everything twice":         {headers, headers, body, body, respHeaders, respHeaders, respBody},
	}
	for _, step := range []string{contract.StepRouter, contract.StepUpstream} {
		for name, seq := range sequences {
			t.Run(step+"/"+name, func(t *testing.T) {
				ctx := metadata.AppendToOutgoingContext(context.Background(), contract.HeaderStep, step)
				stream, err := client.Process(ctx)
				require.NoError(t, err)
				for i, msg := range seq {
					require.NoError(t, stream.Send(msg))
					resp, err := stream.Recv()
					require.NoError(t, err, "message %d", i)
					require.NotNil(t, resp)
					if resp.GetImmediateResponse() != nil {
						return // the step answered for good
					}
				}
			})
		}
	}
	// The server is still up.
	_, err := client.Process(context.Background())
	assert.NoError(t, err)
}

func TestHeaderMapReadsRawAndPlainValues(t *testing.T) {
	hm := &corev3.HeaderMap{Headers: []*corev3.HeaderValue{
		{Key: ":path", RawValue: []byte("/v1/chat/completions")},
		{Key: "x-plain", Value: "from value"},
		{Key: "x-empty"},
		{Key: "x-request-id", RawValue: []byte("req-1")},
		{Key: "x-both", Value: "ignored", RawValue: []byte("raw wins")},
	}}
	assert.Equal(t, map[string]string{
		":path": "/v1/chat/completions", "x-plain": "from value", "x-empty": "",
		"x-request-id": "req-1", "x-both": "raw wins",
	}, headerMap(hm))
}

// Envoy shows the router step the replies of the filters before it
// (ext_authz's 401, the buffer filter's 413) without their request: they
// pass untouched, not turned into 503 no_available_workers.
func TestTheRouterStepLeavesRepliesOfEarlierFiltersAlone(t *testing.T) {
	client := startServer(t)
	for _, status := range []string{"401", "413", "429"} {
		ctx := metadata.AppendToOutgoingContext(t.Context(), contract.HeaderStep, contract.StepRouter)
		stream, err := client.Process(ctx)
		require.NoError(t, err)
		require.NoError(t, stream.Send(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
			ResponseHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: []*corev3.HeaderValue{{Key: ":status", RawValue: []byte(status)}}}},
		}}))
		resp, err := stream.Recv()
		require.NoError(t, err)
		assert.Nil(t, resp.GetImmediateResponse(), "status %s", status)
		assert.Nil(t, resp.GetResponseHeaders().GetResponse().GetHeaderMutation(), "status %s", status)
	}
}
