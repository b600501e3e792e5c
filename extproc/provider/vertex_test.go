package provider

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"golang.org/x/oauth2"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/mockllm"
)

// vertexToken is the access token the tests' vertex adapter sends.
const vertexToken = "ya29.test-token"

func testVertex() vertex {
	return vertex{gemini: gemini{testEnv}, anthropic: anthropic{testEnv},
		token: func(*config.Provider) (string, error) { return vertexToken, nil }}
}

// vertexTarget is a deployment of model on a vertex provider in region.
func vertexTarget(model, region string) Target {
	p := &config.Provider{Name: "vertex-main", Type: config.TypeVertex, Project: "my-project", Region: region,
		BaseURL: config.VertexBaseURL(region)}
	return Target{Model: &config.Model{ID: "public-model", MaxTokens: 8192},
		Deployment: &config.Deployment{Provider: p.Name, Model: model}, Provider: p}
}

func TestVertexSendsEachFamilyToItsPublishersPathWithABearerToken(t *testing.T) {
	tests := []struct {
		name, model, region string
		stream              bool
		path, authority     string
	}{
		{"gemini", "gemini-2.5-flash", "us-central1", false,
			"/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent", "us-central1-aiplatform.googleapis.com"},
		{"gemini_streamed", "gemini-2.5-flash", "us-central1", true,
			"/v1/projects/my-project/locations/us-central1/publishers/google/models/gemini-2.5-flash:streamGenerateContent?alt=sse", "us-central1-aiplatform.googleapis.com"},
		{"gemini_global", "gemini-2.5-pro", "global", false,
			"/v1/projects/my-project/locations/global/publishers/google/models/gemini-2.5-pro:generateContent", "aiplatform.googleapis.com"},
		{"claude", "claude-sonnet-4-5@20250929", "us-east5", false,
			"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict", "us-east5-aiplatform.googleapis.com"},
		{"claude_streamed", "claude-sonnet-4-5@20250929", "global", true,
			"/v1/projects/my-project/locations/global/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict", "aiplatform.googleapis.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := readFixture(t, "vertex/request_chat.json")
			up, _, err := testVertex().Translate(&Request{Body: body, Stream: tt.stream}, vertexTarget(tt.model, tt.region))
			require.NoError(t, err)
			assert.Equal(t, tt.path, up.Path)
			assert.Equal(t, tt.authority, up.Authority)
			assert.Equal(t, []Header{{"content-type", "application/json"}, {"authorization", "Bearer " + vertexToken}}, up.Headers,
				"Google's token, and no API key or anthropic-version header")
			if strings.HasPrefix(tt.model, "claude-") {
				assert.False(t, gjson.GetBytes(up.Body, "model").Exists(), "the model is in the path, not the body")
				assert.Equal(t, VertexAnthropicVersion, gjson.GetBytes(up.Body, "anthropic_version").String())
				assert.Equal(t, "You are terse.", gjson.GetBytes(up.Body, "system").String(), "the anthropic adapter's translation")
				assert.EqualValues(t, 200, gjson.GetBytes(up.Body, "max_tokens").Int())
				assert.Equal(t, tt.stream, gjson.GetBytes(up.Body, "stream").Bool())
			} else {
				want, _, err := gemini{testEnv}.Translate(&Request{Body: body, Stream: tt.stream}, vertexTarget(tt.model, tt.region))
				require.NoError(t, err)
				assert.JSONEq(t, string(want.Body), string(up.Body), "the gemini adapter's body, as it is")
			}
			if !tt.stream {
				golden(t, filepath.Join("vertex", "request_chat."+tt.name+".golden.json"), indentJSON(t, json.RawMessage(up.Body)))
			}
		})
	}
}

func TestVertexAnswersTranslateAsTheirFamilys(t *testing.T) {
	tests := []struct {
		fixture, model string
		usage          Usage
	}{
		{"response_gemini.json", "gemini-2.5-flash", Usage{PromptTokens: 12, CompletionTokens: 14, Reported: true}},
		{"stream_gemini.sse", "gemini-2.5-flash", Usage{PromptTokens: 12, CompletionTokens: 5, Reported: true}},
		{"response_claude.json", "claude-sonnet-4-5@20250929", Usage{PromptTokens: 15, CompletionTokens: 11, Reported: true}},
		{"stream_claude.sse", "claude-sonnet-4-5@20250929", Usage{PromptTokens: 15, CompletionTokens: 11, Reported: true}},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			stream := strings.HasSuffix(tt.fixture, ".sse")
			req := &Request{Body: []byte(`{"model":"public-model","messages":[{"role":"user","content":"hi"}]}`), Stream: stream}
			_, resp, err := testVertex().Translate(req, vertexTarget(tt.model, "us-central1"))
			require.NoError(t, err)
			body := readFixture(t, filepath.Join("vertex", tt.fixture))
			st, out, err := feed(resp, 200, body[:len(body)/2], body[len(body)/2:])
			require.NoError(t, err)
			assert.Equal(t, 200, st)
			if stream {
				requireStreamSchema(t, out)
				golden(t, filepath.Join("vertex", goldenName(tt.fixture, ".sse")), out)
			} else {
				requireSchema(t, schemaCompletion, out)
				golden(t, filepath.Join("vertex", goldenName(tt.fixture, ".json")), out)
			}
			assert.Equal(t, tt.usage, resp.Usage(), "metered from the family's own usage fields")
			assert.True(t, resp.Completed())
		})
	}
}

func TestVertexRefusesWhatItsFamilyRefuses(t *testing.T) {
	body := []byte(`{"model":"public-model","messages":[{"role":"user","content":"x"}],"seed":3}`)
	_, _, err := testVertex().Translate(&Request{Body: body}, vertexTarget("claude-haiku-4-5@20251001", "us-east5"))
	var pe *UnsupportedParameterError
	require.ErrorAs(t, err, &pe, "Claude takes no seed")
	assert.Equal(t, "seed", pe.Param)
	_, _, err = testVertex().Translate(&Request{Body: body}, vertexTarget("gemini-2.5-flash", "us-central1"))
	assert.NoError(t, err, "Gemini takes a seed")
}

func TestVertexFailsTheAttemptAsACredentialErrorWhenNoTokenCanBeHad(t *testing.T) {
	v := testVertex()
	v.token = func(*config.Provider) (string, error) {
		return "", errors.Join(ErrCredential, errors.New("token endpoint: 503"))
	}
	_, _, err := v.Translate(&Request{Body: readFixture(t, "vertex/request_chat.json")}, vertexTarget("gemini-2.5-flash", "us-central1"))
	assert.ErrorIs(t, err, ErrCredential)
}

func TestFamilyIsTheProvidersTypeOrVertexsByModelName(t *testing.T) {
	for _, tt := range []struct{ typ, model, want string }{
		{config.TypeVertex, "claude-opus-4-1@20250805", config.TypeAnthropic},
		{config.TypeVertex, "gemini-2.5-pro", config.TypeGemini},
		{config.TypeAnthropic, "claude-opus-4-1", config.TypeAnthropic},
		{config.TypeOpenAI, "claude-via-proxy", config.TypeOpenAI},
	} {
		assert.Equal(t, tt.want, Family(&config.Provider{Type: tt.typ}, &config.Deployment{Model: tt.model}), "%s %s", tt.typ, tt.model)
	}
}

// newKey is a service account's RSA key.
func newKey(t *testing.T) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	return key
}

// writeServiceAccount writes a service-account key file for email, with
// key, whose token_uri is tokenURI, and returns its path.
func writeServiceAccount(t *testing.T, email, tokenURI string, key *rsa.PrivateKey) string {
	t.Helper()
	file, err := mockllm.ServiceAccountFile(email, tokenURI, key)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(path, file, 0o600))
	return path
}

func TestVertexTokensComeFromTheServiceAccountFileAndAreReused(t *testing.T) {
	const email = "tollgate@my-project.iam.gserviceaccount.com"
	key := newKey(t)
	mock := mockllm.New(mockllm.Options{Record: true, VertexAccounts: map[string]*rsa.PublicKey{email: &key.PublicKey}})
	srv := httptest.NewServer(mock)
	t.Cleanup(srv.Close)
	file := writeServiceAccount(t, email, srv.URL+mockllm.VertexTokenPath, key)
	wrong := writeServiceAccount(t, email, srv.URL+mockllm.VertexTokenPath, newKey(t))

	s := &tokenSources{timeout: 5 * time.Second, sources: map[tokenKey]oauth2.TokenSource{}}
	p := &config.Provider{Name: "vertex-main", Type: config.TypeVertex, CredentialsFile: file}
	first, err := s.token(p)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(first, "ya29.mock-"), "the token the mock issued for the signed JWT")
	again, err := s.token(p)
	require.NoError(t, err)
	assert.Equal(t, first, again, "an unexpired token is reused, not fetched again")

	_, err = s.token(&config.Provider{Name: "vertex-wrong", Type: config.TypeVertex, CredentialsFile: wrong})
	require.ErrorIs(t, err, ErrCredential, "a key the token endpoint does not know")
	assert.NotContains(t, err.Error(), "PRIVATE KEY")
	_, err = s.token(&config.Provider{Name: "vertex-missing", Type: config.TypeVertex, CredentialsFile: filepath.Join(t.TempDir(), "none.json")})
	require.ErrorIs(t, err, ErrCredential, "an unreadable file")
}

func TestVertexPassesAMessagesBodyToClaudeAsVertexTakesIt(t *testing.T) {
	const client = `{"model":"claude-sonnet-4-5@20250929","max_tokens":64,"thinking":{"type":"enabled","budget_tokens":32},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	for _, tt := range []struct {
		name   string
		stream bool
		beta   string
		path   string
	}{
		{"whole", false, "", "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict"},
		{"streamed, with a beta", true, "interleaved-thinking-2025-05-14",
			"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(client)
			if tt.stream {
				body = []byte(strings.Replace(client, `"max_tokens":64,`, `"max_tokens":64,"stream":true,`, 1))
			}
			up, _, err := testVertex().relay(&Request{Stream: tt.stream}, vertexTarget("claude-sonnet-4-5@20250929", "us-east5"), body, tt.beta)
			require.NoError(t, err)
			assert.Equal(t, tt.path, up.Path)
			assert.Equal(t, "us-east5-aiplatform.googleapis.com", up.Authority)
			want := []Header{{"content-type", "application/json"}, {"authorization", "Bearer " + vertexToken}}
			if tt.beta != "" {
				want = append(want, Header{"anthropic-beta", tt.beta})
			}
			assert.Equal(t, want, up.Headers, "Google's token and the client's beta; no anthropic-version header, no API key")
			wantBody, err := sjson.DeleteBytes(body, "model")
			require.NoError(t, err)
			wantBody, err = sjson.SetBytes(wantBody, "anthropic_version", VertexAnthropicVersion)
			require.NoError(t, err)
			assert.Equal(t, string(wantBody), string(up.Body), "the client's body as it is, but the model and with Vertex's version")
		})
	}
}

func TestVertexMetersAPassedThroughClaudeAnswerAsAnthropicsOwn(t *testing.T) {
	answer := []byte(`{"id":"msg_vrtx_01","type":"message","role":"assistant","model":"claude-sonnet-4-5@20250929","content":[{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":7}}`)
	_, meter, err := testVertex().relay(&Request{}, vertexTarget("claude-sonnet-4-5@20250929", "us-east5"), []byte(`{}`), "")
	require.NoError(t, err)
	st, _, err := feed(meter, 200, answer[:40], answer[40:])
	require.NoError(t, err)
	assert.Equal(t, 200, st)
	assert.Equal(t, Usage{PromptTokens: 35, CompletionTokens: 7, CachedTokens: 20, CacheWriteTokens: 5, Reported: true}, meter.Usage(),
		"input, cache reads and writes, output")
	assert.True(t, meter.Completed())
}

func TestVertexFailsAPassedThroughAttemptAsACredentialErrorWhenNoTokenCanBeHad(t *testing.T) {
	v := testVertex()
	v.token = func(*config.Provider) (string, error) {
		return "", errors.Join(ErrCredential, errors.New("token endpoint: 503"))
	}
	_, _, err := v.relay(&Request{}, vertexTarget("claude-sonnet-4-5@20250929", "us-east5"), []byte(`{"max_tokens":5}`), "")
	assert.ErrorIs(t, err, ErrCredential)
}

// An embedding request to Vertex goes to the model's predict, one
// instance an input, dimensions as outputDimensionality, autoTruncate
// false (an input too long is refused, as OpenAI refuses it), with
// Google's token; its answer comes back as OpenAI's list, in base64 when
// asked, billed the predictions' token counts.
func TestVertexEmbeddingsGoToPredictAndComeBackAsOpenAIs(t *testing.T) {
	for _, base64 := range []bool{false, true} {
		body := `{"model":"public-model","input":["What is the meaning of life?","How much wood?"],"dimensions":3}`
		if base64 {
			body = strings.Replace(body, "}", `,"encoding_format":"base64"}`, 1)
		}
		up, r, err := testVertex().embeddings(&Request{Body: []byte(body)}, vertexTarget("text-embedding-005", "us-central1"))
		require.NoError(t, err)
		assert.Equal(t, "/v1/projects/my-project/locations/us-central1/publishers/google/models/text-embedding-005:predict", up.Path)
		assert.Equal(t, "us-central1-aiplatform.googleapis.com", up.Authority)
		assert.Equal(t, []Header{{"content-type", "application/json"}, {"authorization", "Bearer " + vertexToken}}, up.Headers)
		assert.JSONEq(t, `{"instances":[{"content":"What is the meaning of life?"},{"content":"How much wood?"}],
			"parameters":{"outputDimensionality":3,"autoTruncate":false}}`, string(up.Body))

		fixture := readFixture(t, "vertex/predict_embeddings_response.json")
		st, out, err := feed(r, 200, fixture[:100], fixture[100:])
		require.NoError(t, err)
		assert.Equal(t, 200, st)
		assert.Equal(t, "list", gjson.GetBytes(out, "object").Str)
		assert.Equal(t, "public-model", gjson.GetBytes(out, "model").Str)
		require.EqualValues(t, 2, gjson.GetBytes(out, "data.#").Int(), "%s", out)
		for i := range 2 {
			want := gjson.GetBytes(fixture, fmt.Sprintf("predictions.%d.embeddings.values", i)).Array()
			got := gjson.GetBytes(out, fmt.Sprintf("data.%d.embedding", i))
			assert.EqualValues(t, i, gjson.GetBytes(out, fmt.Sprintf("data.%d.index", i)).Int())
			if base64 {
				vals := make([]float64, len(want))
				for j, w := range want {
					vals[j] = w.Float()
				}
				assert.Equal(t, EncodeBase64Floats(vals), got.Str)
				continue
			}
			require.Len(t, got.Array(), len(want))
			for j, w := range want {
				assert.InDelta(t, w.Float(), got.Array()[j].Float(), 1e-9)
			}
		}
		assert.Equal(t, Usage{PromptTokens: 11, Reported: true}, r.Usage(), "the sum of the predictions' token_count")
		assert.EqualValues(t, 11, gjson.GetBytes(out, "usage.prompt_tokens").Int())
		assert.True(t, r.Completed())
	}
}

func TestVertexEmbeddingsRefuseWhatVertexCannotTake(t *testing.T) {
	many := func(n int) string { return `{"model":"m","input":["x"` + strings.Repeat(`,"x"`, n-1) + `]}` }
	for _, tt := range []struct{ name, model, body, msg string }{
		{"token arrays", "text-embedding-005", `{"model":"m","input":[[1,2,3]]}`,
			"This model's provider (vertex) embeds text only: send the input as strings, not token arrays."},
		{"past 250 inputs", "text-embedding-005", many(VertexMaxEmbeddingInputs + 1),
			"This model's provider (vertex) embeds at most 250 inputs a request with text-embedding-005; this one has 251: send them in smaller batches."},
		{"two inputs to a gemini-embedding model", "gemini-embedding-001", many(2),
			"This model's provider (vertex) embeds at most 1 input a request with gemini-embedding-001; this one has 2: send them in smaller batches."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := testVertex().embeddings(&Request{Body: []byte(tt.body)}, vertexTarget(tt.model, "us-central1"))
			assert.ErrorIs(t, err, ErrUnsupportedRequest)
			assert.EqualError(t, err, tt.msg)
		})
	}
	_, _, err := testVertex().embeddings(&Request{Body: []byte(many(VertexMaxEmbeddingInputs))}, vertexTarget("text-embedding-005", "us-central1"))
	assert.NoError(t, err, "250 inputs pass")
}

// An answer whose predictions carry no token count is billed the input's
// estimate; one without predictions is untranslatable; a token that cannot
// be had fails the attempt as the credential's.
func TestVertexEmbeddingAnswersWithoutCountsAreEstimated(t *testing.T) {
	body := []byte(`{"model":"m","input":"Paris"}`)
	_, r, err := testVertex().embeddings(&Request{Body: body}, vertexTarget("text-embedding-005", "us-central1"))
	require.NoError(t, err)
	_, _, err = feed(r, 200, []byte(`{"predictions":[{"embeddings":{"values":[0.5,0.5]}}]}`))
	require.NoError(t, err)
	assert.Equal(t, Usage{PromptTokens: EstimateTokens("Paris\n")}, r.Usage())

	_, r, err = testVertex().embeddings(&Request{Body: body}, vertexTarget("text-embedding-005", "us-central1"))
	require.NoError(t, err)
	_, _, err = feed(r, 200, []byte(`{"error":"none"}`))
	assert.ErrorIs(t, err, ErrUntranslatable)
	assert.False(t, r.Completed())

	v := testVertex()
	v.token = func(*config.Provider) (string, error) { return "", errors.Join(ErrCredential, errors.New("no token")) }
	_, _, err = v.embeddings(&Request{Body: body}, vertexTarget("text-embedding-005", "us-central1"))
	assert.ErrorIs(t, err, ErrCredential)
}
