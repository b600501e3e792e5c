package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// modelsConfig has five models; azure-gpt-4o's only provider is switched
// off, and plan "basic" has four of the five.
func modelsConfig(openaiURL, anthropicURL, geminiURL, azureURL string) string {
	return fmt.Sprintf(`key_prefix: tg
providers:
  - {name: openai, type: openai, base_url: "%s/v1", api_key: sk-openai-secret}
  - {name: anthropic, type: anthropic, base_url: "%s", api_key: sk-ant-secret}
  - {name: gemini, type: gemini, base_url: "%s", api_key: gem-secret}
  - {name: azure, type: azure, base_url: "%s", api_key: az-secret, enabled: false}
models:
  - {id: gpt-4o-mini, max_tokens: 100, input_price_per_million: 1, output_price_per_million: 1, deployments: [{provider: openai, model: m}]}
  - {id: claude-sonnet, max_tokens: 100, input_price_per_million: 1, output_price_per_million: 1, deployments: [{provider: anthropic, model: m}]}
  - {id: gemini-flash, max_tokens: 100, input_price_per_million: 1, output_price_per_million: 1, deployments: [{provider: gemini, model: m}]}
  - {id: azure-gpt-4o, max_tokens: 100, input_price_per_million: 1, output_price_per_million: 1, deployments: [{provider: azure, model: m}]}
  - {id: gpt-4o, max_tokens: 100, input_price_per_million: 1, output_price_per_million: 1, deployments: [{provider: openai, model: m}]}
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
  - {name: basic, default_rpm: 0, models: [gpt-4o-mini, claude-sonnet, gemini-flash, azure-gpt-4o]}
`, openaiURL, anthropicURL, geminiURL, azureURL)
}

func TestModelListIsPlanAndKeyAllowListAndAvailability(t *testing.T) {
	t.Parallel()
	tg := startTollgate(t, modelsConfig(
		newMockProvider(t, "openai").URL, newMockProvider(t, "anthropic").URL,
		newMockProvider(t, "gemini").URL, newMockProvider(t, "azure").URL), "")
	tg.run(t, "account", "create", "--email", "basic@example.com", "--plan", "basic", "--balance", "10")
	tg.run(t, "account", "create", "--email", "pro@example.com", "--plan", "pro", "--balance", "10")
	// A key whose allow-list names a model of a bigger plan: made while its
	// account was on that plan (a key cannot be made so today).
	tg.run(t, "account", "create", "--email", "was-pro@example.com", "--plan", "pro", "--balance", "10")
	wasPro := tg.newKey(t, "was-pro@example.com", "--model", "gpt-4o-mini", "--model", "claude-sonnet", "--model", "azure-gpt-4o", "--model", "gpt-4o")
	tg.run(t, "account", "plan", "--email", "was-pro@example.com", "--plan", "basic")

	tests := []struct {
		name    string
		email   string
		keyArgs []string
		secret  string   // a key made before, instead of a new one
		want    []string // in the configuration's order
	}{
		{
			name: "plan, allow-list and availability together",
			// gemini-flash is in the plan, not the list; gpt-4o in the list,
			// not the plan; azure-gpt-4o in both but its provider is off.
			secret: wasPro,
			want:   []string{"gpt-4o-mini", "claude-sonnet"},
		},
		{
			name:  "a key for all models gets the plan's available ones",
			email: "basic@example.com",
			want:  []string{"gpt-4o-mini", "claude-sonnet", "gemini-flash"},
		},
		{
			name:  "a plan of every model",
			email: "pro@example.com",
			want:  []string{"gpt-4o-mini", "claude-sonnet", "gemini-flash", "gpt-4o"},
		},
		{
			name:    "an allow-list of unavailable models only",
			email:   "pro@example.com",
			keyArgs: []string{"--model", "azure-gpt-4o"},
			want:    []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			secret := tt.secret
			if secret == "" {
				secret = tg.newKey(t, tt.email, tt.keyArgs...)
			}

			// The SDK lists them.
			page, err := tg.client(secret).Models.List(context.Background())
			require.NoError(t, err)
			got := []string{}
			for _, m := range page.Data {
				got = append(got, m.ID)
				assert.Equal(t, "model", string(m.Object))
				assert.NotEmpty(t, m.OwnedBy)
			}
			assert.Equal(t, tt.want, got)

			// On the wire: OpenAI's list shape exactly.
			resp, body := tg.do(t, http.MethodGet, "/models", secret, "")
			require.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			requireSchema(t, schemaModelList, body)
			var list struct {
				Object string `json:"object"`
				Data   []struct {
					ID      string `json:"id"`
					Object  string `json:"object"`
					Created *int64 `json:"created"`
					OwnedBy string `json:"owned_by"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(body, &list))
			assert.Equal(t, "list", list.Object)
			require.NotNil(t, list.Data, "data is an array, even when empty: %s", body)
			require.Len(t, list.Data, len(tt.want))
			for i, m := range list.Data {
				assert.Equal(t, tt.want[i], m.ID)
				assert.Equal(t, "model", m.Object)
				assert.NotNil(t, m.Created)
			}
		})
	}
}

// TestOneModelIsServedForExactlyTheListedModels: GET /v1/models/{id} (what
// openai-go's Models.Get calls) answers the entry of a model the list
// shows, with its configured created date, and 404 model_not_found in
// OpenAI's shape for an unknown model and for one the key may not use —
// alike, so that a key learns nothing of models it cannot use.
func TestOneModelIsServedForExactlyTheListedModels(t *testing.T) {
	t.Parallel()
	cfg := modelsConfig(newMockProvider(t, "openai").URL, newMockProvider(t, "anthropic").URL,
		newMockProvider(t, "gemini").URL, newMockProvider(t, "azure").URL)
	cfg = strings.Replace(cfg, "{id: claude-sonnet, max_tokens: 100,", "{id: claude-sonnet, created: 2025-02-24, max_tokens: 100,", 1)
	tg := startTollgate(t, cfg, "")
	tg.run(t, "account", "create", "--email", "basic@example.com", "--plan", "pro", "--balance", "10")
	secret := tg.newKey(t, "basic@example.com", "--model", "gpt-4o-mini", "--model", "claude-sonnet", "--model", "gpt-4o")
	tg.run(t, "account", "plan", "--email", "basic@example.com", "--plan", "basic") // gpt-4o leaves the plan
	client := tg.client(secret)

	m, err := client.Models.Get(context.Background(), "claude-sonnet")
	require.NoError(t, err)
	assert.Equal(t, "claude-sonnet", m.ID)
	assert.Equal(t, "model", string(m.Object))
	assert.Equal(t, time.Date(2025, 2, 24, 0, 0, 0, 0, time.UTC).Unix(), m.Created, "the configured date")
	m, err = client.Models.Get(context.Background(), "gpt-4o-mini")
	require.NoError(t, err)
	assert.InDelta(t, time.Now().Unix(), m.Created, 120, "no date configured: the configuration's load time")

	list, err := client.Models.List(context.Background())
	require.NoError(t, err)
	for _, e := range list.Data {
		assert.NotZero(t, e.Created, "%s", e.ID)
	}

	for _, id := range []string{"no-such-model", "gemini-flash" /* in the plan, not the key's list */, "gpt-4o" /* not in the plan */} {
		req, err := http.NewRequest(http.MethodGet, tg.BaseURL+"/models/"+id, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusNotFound, resp.StatusCode, "%s: %s", id, body)
		var e struct {
			Error struct{ Message, Type, Code, Param string }
		}
		require.NoError(t, json.Unmarshal(body, &e))
		assert.Equal(t, "model_not_found", e.Error.Code, id)
		assert.Equal(t, "invalid_request_error", e.Error.Type, id)
		assert.Equal(t, "model", e.Error.Param, id)
		assert.Contains(t, e.Error.Message, id)
	}
}
