package e2e

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/money"
)

// TestBedrockEmbeddingsAreSignedAndBilled: embeddings on Bedrock go
// through InvokeModel, signed as AWS checks it: a Titan model one text a
// request, billed its reported tokens; a Cohere model a batch, billed its
// input's estimate (Cohere reports none); a batch past Titan's one input is
// refused with the limit named, and billed nothing.
func TestBedrockEmbeddingsAreSignedAndBilled(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "bedrock", mockllm.Options{AWS: bedrockKeys, Usage: &mockllm.Usage{Prompt: 6}}, nil)
	tg := startTollgate(t, fmt.Sprintf(`key_prefix: tg
providers:
  - {name: bedrock, type: bedrock, base_url: "%[1]s", region: us-east-1, access_key_id: %[2]s, secret_access_key: "%[3]s"}
models:
  - {id: titan, kind: embedding, input_price_per_million: 0.02, deployments: [{provider: bedrock, model: "amazon.titan-embed-text-v2:0"}]}
  - {id: cohere, kind: embedding, input_price_per_million: 0.10, deployments: [{provider: bedrock, model: "cohere.embed-english-v3"}]}
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
`, mock.URL, bedrockKeys.AccessKeyID, bedrockKeys.SecretAccessKey), "")
	secret := tg.newAccount(t, "bedrock-embed@example.com", "10")
	keyID := tg.onlyKeyID(t, "bedrock-embed@example.com")

	resp, body := tg.do(t, http.MethodPost, "/embeddings", secret, `{"model":"titan","input":"The food was delicious","dimensions":256}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, "titan", gjson.GetBytes(body, "model").Str)
	got := gjson.GetBytes(body, "data.0.embedding").Array()
	require.Len(t, got, 256)
	assert.InDelta(t, mockllm.Embedding("The food was delicious", 256)[0], got[0].Float(), 1e-6)

	resp, body = tg.do(t, http.MethodPost, "/embeddings", secret, `{"model":"cohere","input":["hello","world"]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.EqualValues(t, 2, gjson.GetBytes(body, "data.#").Int())

	resp, body = tg.do(t, http.MethodPost, "/embeddings", secret, `{"model":"titan","input":["a","b"]}`)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
	assert.Contains(t, gjson.GetBytes(body, "error.message").Str, "Amazon Titan Text Embeddings on Bedrock embeds 1 input a request; this one has 2")

	recs := tg.waitRecords(t, keyID, 3)
	byModel := map[string]usageRecord{}
	for _, r := range recs {
		byModel[r.Model+fmt.Sprint(r.Status)] = r
	}
	assert.EqualValues(t, 6, byModel["titan200"].PromptTokens, "Titan's reported tokens")
	assert.Equal(t, money.Cost(6, money.PerDollar/50), byModel["titan200"].Cost)
	assert.Positive(t, byModel["cohere200"].PromptTokens, "Cohere's input, estimated")
	assert.Zero(t, byModel["titan400"].Cost, "a refused batch costs nothing")
	assert.Empty(t, mock.issues(), "signed as AWS checks it")
}
