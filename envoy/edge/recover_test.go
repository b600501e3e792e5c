package edge

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/internal/guard"
)

type panickyAuthz struct{}

func (panickyAuthz) Check(context.Context, *authv3.CheckRequest, ...grpc.CallOption) (*authv3.CheckResponse, error) {
	panic("check")
}

// TestAPanicBeforeTheAnswerIs500: the request gets 500 internal_error
// naming it, the panic is counted, and the edge serves the next request.
func TestAPanicBeforeTheAnswerIs500(t *testing.T) {
	f := newFixture(t, 1, newProvider(t, 200).endpoint(t, "d1", 0))
	f.edge.opt.Authz = panickyAuthz{}
	before := guard.CountOf(WherePanic)
	rec := f.do(t)
	assert.Equal(t, http.StatusInternalServerError, rec.Code)
	assert.Contains(t, rec.Body.String(), `"code":"internal_error"`)
	assert.Contains(t, rec.Body.String(), rec.Header().Get("x-request-id"))
	assert.Equal(t, before+1, guard.CountOf(WherePanic))

	f.edge.opt.Authz = allowAll{}
	assert.Equal(t, http.StatusOK, f.do(t).Code)
}

// panickyBody is an ext_proc whose upstream step panics on the answer's
// body, as a buggy translator would (in the client's process: no gRPC).
type panickyBody struct{ *fakeExtProc }

func (p panickyBody) Process(ctx context.Context, opts ...grpc.CallOption) (grpc.BidiStreamingClient[extprocv3.ProcessingRequest, extprocv3.ProcessingResponse], error) {
	s, err := p.fakeExtProc.Process(ctx, opts...)
	return panickySend{s}, err
}

type panickySend struct {
	grpc.BidiStreamingClient[extprocv3.ProcessingRequest, extprocv3.ProcessingResponse]
}

func (s panickySend) Send(req *extprocv3.ProcessingRequest) error {
	if req.GetResponseBody() != nil {
		panic("translate")
	}
	return s.BidiStreamingClient.Send(req)
}

// TestAPanicMidStreamEndsTheStreamWithAnErrorEvent: the client already has
// its 200; its stream ends with one internal_error event, no [DONE].
func TestAPanicMidStreamEndsTheStreamWithAnErrorEvent(t *testing.T) {
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: {}\n\n"))
	}))
	t.Cleanup(p.Close)
	f := newFixture(t, 1, (&provider{Server: p}).endpoint(t, "d1", 0))
	f.edge.opt.ExtProc = panickyBody{f.proc}
	rec := f.do(t)
	assert.Equal(t, http.StatusOK, rec.Code)
	body := rec.Body.String()
	require.True(t, strings.HasPrefix(body, `data: {"error":`), "%s", body)
	assert.Contains(t, body, `"code":"internal_error"`)
	assert.NotContains(t, body, "[DONE]")
}
