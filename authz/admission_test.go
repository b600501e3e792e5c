package authz

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/tollgate/tollgate/admission"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/ratelimit"
)

// At capacity a new request is refused before its key is looked up: a
// 503 in OpenAI's shape with a Retry-After, and the keys store is never
// asked (nil here: asking it would panic).
func TestAtCapacityANewRequestIsRefusedWith503AndRetryAfterBeforeAnyLookup(t *testing.T) {
	cfg, err := config.Parse([]byte(cfgText), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	gate := admission.New(1)
	leave := gate.Enter()
	s := New(Options{Limiter: ratelimit.NewMemory(), Config: func() *config.Config { return cfg }, Admission: gate})

	resp, err := s.Check(context.Background(), check(map[string]string{"authorization": "Bearer tg_sk_whatever"}, "127.0.0.1"))
	require.NoError(t, err)
	assert.Equal(t, int32(codes.PermissionDenied), resp.GetStatus().GetCode())
	denied := resp.GetDeniedResponse()
	assert.EqualValues(t, 503, denied.GetStatus().GetCode())
	headers := map[string]string{}
	for _, h := range denied.GetHeaders() {
		headers[h.GetHeader().GetKey()] = h.GetHeader().GetValue()
	}
	assert.Equal(t, "1", headers["retry-after"])
	var body struct {
		Error struct{ Message, Type, Code string }
	}
	require.NoError(t, json.Unmarshal([]byte(denied.GetBody()), &body))
	assert.Equal(t, "no_available_workers", body.Error.Code)
	assert.Equal(t, "service_unavailable", body.Error.Type)
	assert.Contains(t, body.Error.Message, "capacity")
	assert.EqualValues(t, 1, gate.Refused())

	// Once the request in flight ends, the next one is checked as usual
	// (here: an unknown key's 401, from the store the test did not give).
	leave()
	assert.True(t, gate.Admit())
}
