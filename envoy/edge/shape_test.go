package edge

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

type failingAuthz struct{}

func (failingAuthz) Check(context.Context, *authv3.CheckRequest, ...grpc.CallOption) (*authv3.CheckResponse, error) {
	return nil, errors.New("unreachable")
}

// TestTheEdgesOwnErrorsAreInTheShapeOfThePath: the errors the edge answers
// itself (a body over the limit, ext_authz out of reach, a panic) are in
// Anthropic's shape on the Messages API's paths (Claude Code's ?beta=true
// included) and in OpenAI's elsewhere.
func TestTheEdgesOwnErrorsAreInTheShapeOfThePath(t *testing.T) {
	big := strings.Repeat("x", 2<<20) // over the fixture's 1 MiB
	for _, tc := range []struct {
		name   string
		body   string
		authz  authv3.AuthorizationClient
		status int
		typ    string // Anthropic's error type
		code   string
	}{
		{"a body over the limit", big, allowAll{}, http.StatusRequestEntityTooLarge, "request_too_large", "request_too_large"},
		{"ext_authz out of reach", `{}`, failingAuthz{}, http.StatusInternalServerError, "api_error", "internal_error"},
		{"a panic", `{}`, panickyAuthz{}, http.StatusInternalServerError, "api_error", "internal_error"},
	} {
		for _, path := range []string{"/v1/messages", "/v1/messages?beta=true", "/v1/messages/count_tokens"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				f := newFixture(t, 1, newProvider(t, 200).endpoint(t, "d1", 0))
				f.edge.opt.Authz = tc.authz
				rec := httptest.NewRecorder()
				f.edge.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(tc.body)))
				assert.Equal(t, tc.status, rec.Code)
				assert.Equal(t, "application/json", rec.Header().Get("Content-Type"))
				var got struct {
					Type  string
					Error struct{ Type, Message string }
				}
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got), rec.Body.String())
				assert.Equal(t, "error", got.Type)
				assert.Equal(t, tc.typ, got.Error.Type)
				assert.True(t, strings.HasPrefix(got.Error.Message, tc.code+": "), got.Error.Message)
			})
		}
		t.Run(tc.name+" elsewhere", func(t *testing.T) {
			f := newFixture(t, 1, newProvider(t, 200).endpoint(t, "d1", 0))
			f.edge.opt.Authz = tc.authz
			rec := httptest.NewRecorder()
			f.edge.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(tc.body)))
			assert.Equal(t, tc.status, rec.Code)
			assert.Contains(t, rec.Body.String(), `"code":"`+tc.code+`"`)
		})
	}
}

// TestAMessagesRequestTakesTheSameWayAsAnyOther: the edge hands
// /v1/messages (with Claude Code's query) and its count_tokens to the
// router step like every /v1/ path, and on to the cluster it names.
func TestAMessagesRequestTakesTheSameWayAsAnyOther(t *testing.T) {
	for _, path := range []string{"/v1/messages?beta=true", "/v1/messages/count_tokens"} {
		p := newProvider(t, 200)
		f := newFixture(t, 1, p.endpoint(t, "d1", 0))
		rec := httptest.NewRecorder()
		f.edge.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(`{"model":"m"}`)))
		assert.Equal(t, http.StatusOK, rec.Code, path)
		assert.Equal(t, "answer", rec.Body.String(), path)
		assert.EqualValues(t, 1, p.hits.Load(), path)
	}
}
