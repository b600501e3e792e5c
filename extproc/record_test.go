package extproc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

func TestUsageMetadataCarriesTheRecordForTheAccessLogInFewAllocations(t *testing.T) {
	for _, rec := range []store.UsageRecord{
		{KeyID: "key-1", Endpoint: store.EndpointChat, Model: "gpt-4o-mini", Provider: "openai", PromptTokens: 20, CompletionTokens: 7, Cost: 1_234_567},
		{KeyID: "key-2", Model: "claude", Provider: "anthropic", Estimated: true, Cost: 3 * money.PerDollar},
	} {
		inner, err := structpb.NewStruct(map[string]any{
			"key_id": rec.KeyID, "endpoint": rec.Endpoint, "model": rec.Model, "provider": rec.Provider,
			"prompt_tokens": float64(rec.PromptTokens), "completion_tokens": float64(rec.CompletionTokens),
			"cost_usd": rec.Cost.String(), "estimated": rec.Estimated,
		})
		require.NoError(t, err)
		want := &structpb.Struct{Fields: map[string]*structpb.Value{contract.DynamicMetadataNamespace: structpb.NewStructValue(inner)}}
		got := usageMetadata(rec)
		assert.True(t, proto.Equal(want, got), "got %v, want %v", got, want)
	}
	rec := store.UsageRecord{KeyID: "key-1", Model: "m", Provider: "p", Cost: 1_234_567}
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { _ = usageMetadata(rec) }), 6.0)
}
