package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

const valid = `
providers:
  - name: openai
    type: openai
    base_url: https://api.openai.com/v1/
    api_key: ${OPENAI_API_KEY}
  - name: az
    type: azure
    base_url: https://res.openai.azure.com
    api_key: k
models:
  - id: gpt-4o-mini
    max_tokens: 16384
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments:
      - provider: openai
        model: gpt-4o-mini
      - provider: az
        model: my-deployment
        priority: 1
        weight: 3
plans:
  - name: pro
    models: ["*"]
  - name: free
    default_rpm: 20
    models: [gpt-4o-mini]
`

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestValidConfigGetsDefaultsAndExactPrices(t *testing.T) {
	c, err := Parse([]byte(valid), env(map[string]string{"OPENAI_API_KEY": "sk-test"}))
	require.NoError(t, err)
	assert.Equal(t, "tg", c.KeyPrefix)
	assert.Equal(t, DefaultMaxBodyBytes, c.MaxBodyBytes)
	p, ok := c.Provider("openai")
	require.True(t, ok)
	assert.Equal(t, "https://api.openai.com/v1", p.BaseURL, "a trailing slash is dropped")
	assert.Equal(t, "sk-test", p.APIKey.Reveal())
	az, _ := c.Provider("az")
	assert.Equal(t, DefaultAzureVersion, az.APIVersion)
	m, ok := c.Model("gpt-4o-mini")
	require.True(t, ok)
	assert.Equal(t, money.Nanos(150_000_000), m.InputPricePerMillion)
	assert.Equal(t, money.Nanos(600_000_000), m.OutputPricePerMillion)
	assert.Equal(t, 1, m.Deployments[0].Weight, "weight defaults to 1")
	assert.Equal(t, "gpt-4o-mini#az/my-deployment", m.Deployments[1].ID)
	dm, d, dp, ok := c.Deployment("gpt-4o-mini#az/my-deployment")
	require.True(t, ok)
	assert.Equal(t, "gpt-4o-mini", dm.ID)
	assert.Equal(t, "my-deployment", d.Model)
	assert.Equal(t, "az", dp.Name)
	assert.Equal(t, DefaultConnectTimeout, p.ConnectTimeout.D())
	assert.Equal(t, DefaultFirstByteTimeout, p.FirstByteTimeout.D())
	assert.Equal(t, DefaultStreamIdleTimeout, p.StreamIdleTimeout.D())
	assert.Equal(t, DefaultRequestTimeout, m.RequestTimeout.D())
	free, _ := c.Plan("free")
	assert.True(t, free.AllowsModel("gpt-4o-mini"))
	assert.False(t, free.AllowsModel("gpt-4o"))
}

func TestCredentialsNeverPrint(t *testing.T) {
	c, err := Parse([]byte(valid), env(map[string]string{"OPENAI_API_KEY": "sk-very-secret"}))
	require.NoError(t, err)
	p, _ := c.Provider("openai")
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		assert.NotContains(t, strings.ReplaceAll(sprintf(format, *p), " ", ""), "sk-very-secret", format)
	}
}

func TestEnvironmentDefaults(t *testing.T) {
	text := strings.Replace(valid, "${OPENAI_API_KEY}", "${OPENAI_API_KEY:-fallback}", 1)
	c, err := Parse([]byte(text), env(nil))
	require.NoError(t, err)
	p, _ := c.Provider("openai")
	assert.Equal(t, "fallback", p.APIKey.Reveal())

	text = strings.Replace(valid, "${OPENAI_API_KEY}", "${OPENAI_API_KEY:-}", 1)
	c, err = Parse([]byte(text), env(nil))
	require.NoError(t, err)
	p, _ = c.Provider("openai")
	assert.Equal(t, "", p.APIKey.Reveal())
}

func TestBadConfigNamesTheField(t *testing.T) {
	tests := []struct {
		name        string
		from, to    string
		env         map[string]string
		wantInError string
	}{
		{"unset variable", "", "", map[string]string{}, "OPENAI_API_KEY is not set"},
		{"unknown field", "max_tokens: 16384", "max_tokenz: 16384", nil, "max_tokenz"},
		{"bad type", "type: azure", "type: sagemaker", nil, "providers[1] (az).type"},
		{"bad base url", "https://res.openai.azure.com", "ftp://x", nil, "providers[1] (az).base_url"},
		{"unknown provider", "provider: az", "provider: nope", nil, "models[0] (gpt-4o-mini).deployments[1].provider"},
		{"inexact price", "0.15", "0.0000000001", nil, "input_price_per_million"},
		{"price not a number", "0.15", "cheap", nil, "input_price_per_million"},
		{"negative price", "0.60", "-1", nil, "output_price_per_million"},
		{"no max tokens", "max_tokens: 16384", "max_tokens: 0", nil, "max_tokens"},
		{"unknown plan model", "models: [gpt-4o-mini]", "models: [gpt-5]", nil, "plans[1] (free).models[0]"},
		{"negative rpm", "default_rpm: 20", "default_rpm: -1", nil, "default_rpm"},
		{"negative tpm", "default_rpm: 20", "default_rpm: 20\n    default_tpm: -1", nil, "default_tpm"},
		{"duplicate provider", "name: az", "name: openai", nil, "defined twice"},
		{"bad weight", "weight: 3", "weight: 1000", nil, "weight"},
		{"bad prefix", "providers:", "key_prefix: TG\nproviders:", nil, "key_prefix"},
		{"no keys allowed", "providers:", "limits: {keys_per_account: -1}\nproviders:", nil, "limits.keys_per_account"},
		{"negative token cap", "providers:", "limits: {tokens_per_account: -5}\nproviders:", nil, "limits.tokens_per_account"},
		{"negative management rpm", "providers:", "limits: {management_rpm: -1}\nproviders:", nil, "limits.management_rpm"},
		{"unknown limit", "providers:", "limits: {keys: 3}\nproviders:", nil, "keys"},
		{"alias is an id", "max_tokens: 16384", "max_tokens: 16384\n    aliases: [gpt-4o-mini]", nil, "already a model's id"},
		{"alias twice", "max_tokens: 16384", "max_tokens: 16384\n    aliases: [mini, mini]", nil, "already an alias"},
		{"star inside an alias", "max_tokens: 16384", "max_tokens: 16384\n    aliases: [\"a*b\"]", nil, "may only end"},
		{"unknown kind", "max_tokens: 16384", "max_tokens: 16384\n    kind: image", nil, "models[0] (gpt-4o-mini).kind"},
		{"embedding with max_tokens", "max_tokens: 16384", "max_tokens: 16384\n    kind: embedding", nil, "writes no tokens"},
		{"search units off rerank", "max_tokens: 16384", "max_tokens: 16384\n    search_unit_price: 0.002", nil, "search_unit_price"},
		{"unknown rerank api", "type: azure", "type: openai\n    rerank_api: jina", nil, "rerank_api"},
		{"rerank api off openai", "type: azure", "type: azure\n    rerank_api: voyage", nil, "rerank_api"},
		{"bare star alias", "max_tokens: 16384", "max_tokens: 16384\n    aliases: [\"*\"]", nil, "aliases[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := valid
			if tt.from != "" {
				require.Contains(t, text, tt.from)
				text = strings.Replace(text, tt.from, tt.to, 1)
			}
			vars := tt.env
			if vars == nil {
				vars = map[string]string{"OPENAI_API_KEY": "k"}
			}
			_, err := Parse([]byte(text), env(vars))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantInError)
		})
	}
	_, err := Parse([]byte(""), env(nil))
	assert.ErrorContains(t, err, "empty")
}

func TestTheExampleConfigsParse(t *testing.T) {
	for _, path := range []string{"../examples/config.yaml"} {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		_, err = Parse(data, env(nil))
		assert.NoError(t, err, path)
	}
}

func sprintf(format string, v any) string { return fmtSprintf(format, v) }

var fmtSprintf = fmt.Sprintf

func TestModelAvailableNeedsAnEnabledProviderWithAHealthyDeployment(t *testing.T) {
	disabledAz := strings.Replace(valid, "    api_key: k\n", "    api_key: k\n    enabled: false\n", 1)
	tests := []struct {
		name   string
		config string
		down   []string // deployment ids the health check reports down
		want   bool
	}{
		{"both deployments up", valid, []string{}, true},
		{"no health check counts every deployment", valid, nil, true},
		{"one of two deployments down", valid, []string{"gpt-4o-mini#openai/gpt-4o-mini"}, true},
		{"every deployment down", valid, []string{"gpt-4o-mini#openai/gpt-4o-mini", "gpt-4o-mini#az/my-deployment"}, false},
		{"the only healthy deployment's provider is disabled", disabledAz, []string{"gpt-4o-mini#openai/gpt-4o-mini"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.config), env(map[string]string{"OPENAI_API_KEY": "sk"}))
			require.NoError(t, err)
			m, ok := c.Model("gpt-4o-mini")
			require.True(t, ok)
			var available func(string) bool
			if tt.down != nil {
				available = func(id string) bool {
					for _, d := range tt.down {
						if d == id {
							return false
						}
					}
					return true
				}
			}
			assert.Equal(t, tt.want, c.ModelAvailable(m, available))
		})
	}
}

func TestDeploymentIdentityDoesNotDependOnOrder(t *testing.T) {
	swapped := strings.Replace(valid, `      - provider: openai
        model: gpt-4o-mini
      - provider: az
        model: my-deployment
        priority: 1
        weight: 3`, `      - provider: az
        model: my-deployment
        priority: 1
        weight: 3
      - provider: openai
        model: gpt-4o-mini`, 1)
	require.NotEqual(t, valid, swapped)
	vars := env(map[string]string{"OPENAI_API_KEY": "sk"})
	a, err := Parse([]byte(valid), vars)
	require.NoError(t, err)
	b, err := Parse([]byte(swapped), vars)
	require.NoError(t, err)
	for _, c := range []*Config{a, b} {
		_, d, p, ok := c.Deployment("gpt-4o-mini#az/my-deployment")
		require.True(t, ok)
		assert.Equal(t, "az", p.Name)
		assert.Equal(t, "my-deployment", d.Model)
	}
}

func TestTimeoutsAreReadAndChecked(t *testing.T) {
	vars := env(map[string]string{"OPENAI_API_KEY": "sk"})
	withTimeouts := strings.Replace(valid, "    api_key: k\n", "    api_key: k\n    connect_timeout: 2s\n    first_byte_timeout: 1m30s\n    stream_idle_timeout: 15s\n", 1)
	withTimeouts = strings.Replace(withTimeouts, "    output_price_per_million: 0.60\n", "    output_price_per_million: 0.60\n    request_timeout: 3m\n", 1)
	c, err := Parse([]byte(withTimeouts), vars)
	require.NoError(t, err)
	az, _ := c.Provider("az")
	assert.Equal(t, 2*time.Second, az.ConnectTimeout.D())
	assert.Equal(t, 90*time.Second, az.FirstByteTimeout.D())
	assert.Equal(t, 15*time.Second, az.StreamIdleTimeout.D())
	m, _ := c.Model("gpt-4o-mini")
	assert.Equal(t, 3*time.Minute, m.RequestTimeout.D())

	for _, tt := range []struct{ name, edit, field string }{
		{"not a duration", "    connect_timeout: soon\n", `"soon" is not a duration`},
		{"negative", "    stream_idle_timeout: -1s\n", "stream_idle_timeout"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(valid, "    api_key: k\n", "    api_key: k\n"+tt.edit, 1)), vars)
			assert.ErrorContains(t, err, tt.field)
		})
	}
}

func TestARepeatedDeploymentIsRefused(t *testing.T) {
	dup := strings.Replace(valid, `      - provider: az
        model: my-deployment`, `      - provider: openai
        model: gpt-4o-mini`, 1)
	_, err := Parse([]byte(dup), env(map[string]string{"OPENAI_API_KEY": "sk"}))
	assert.ErrorContains(t, err, "deployments[1]")
}

func TestForwardHeadersAreHeaderNamesNotTollgatesOwn(t *testing.T) {
	vars := env(map[string]string{"OPENAI_API_KEY": "sk"})
	c, err := Parse([]byte(strings.Replace(valid, "    api_key: k\n", "    api_key: k\n    forward_headers: [X-Team, OpenAI-Beta]\n", 1)), vars)
	require.NoError(t, err)
	az, _ := c.Provider("az")
	assert.Equal(t, []string{"x-team", "openai-beta"}, az.ForwardHeaders, "lowercased")
	for _, bad := range []string{"x-tollgate-key-id", "content-length", "not a header", ""} {
		_, err := Parse([]byte(strings.Replace(valid, "    api_key: k\n", "    api_key: k\n    forward_headers: [\""+bad+"\"]\n", 1)), vars)
		assert.ErrorContains(t, err, "forward_headers[0]", bad)
	}
}

func TestCachedPromptTokensArePricedApart(t *testing.T) {
	cfg, err := Parse([]byte(`
providers: [{name: p, type: openai, base_url: "http://x/v1"}]
models:
  - {id: cheap-cache, max_tokens: 100, input_price_per_million: 3, output_price_per_million: 15, cached_input_price_per_million: 0.30, cache_write_price_per_million: 3.75, deployments: [{provider: p, model: m}]}
  - {id: plain, max_tokens: 100, input_price_per_million: 3, output_price_per_million: 15, deployments: [{provider: p, model: m}]}
plans: [{name: pro, models: ["*"]}]
`), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cheap, _ := cfg.Model("cheap-cache")
	plain, _ := cfg.Model("plain")
	assert.Equal(t, plain.InputPricePerMillion, plain.CachedInputPricePerMillion, "no cache price: the input price")
	assert.Equal(t, plain.InputPricePerMillion, plain.CacheWritePricePerMillion)
	tok := Tokens{Prompt: 1_000_000, CachedPrompt: 600_000, CacheWrite: 100_000, Completion: 1_000_000}
	// 300k uncached × $3 + 600k cached × $0.30 + 100k written × $3.75 + 1M × $15
	assert.Equal(t, money.Nanos(900_000_000+180_000_000+375_000_000+15_000_000_000), cheap.Cost(tok))
	assert.Equal(t, money.Nanos(3_000_000_000+15_000_000_000), plain.Cost(tok), "without cache prices, the cache changes nothing")
	assert.Equal(t, cheap.CacheWritePricePerMillion, cheap.MostPromptPrice(), "a hold prices the prompt at its dearest")
	over := Tokens{Prompt: 10, CachedPrompt: 25, CacheWrite: 5}
	assert.Equal(t, money.Cost(10, cheap.CachedInputPricePerMillion), cheap.Cost(over), "counts beyond the prompt are capped")
}

func TestResponsesAPIIsForOpenAIProvidersAndRetentionHasADefault(t *testing.T) {
	c, err := Parse([]byte(`
providers: [{name: p, type: openai, base_url: "http://x/v1", responses_api: true}]
models: [{id: m, max_tokens: 10, deployments: [{provider: p, model: m}]}]
plans: [{name: free, models: ["*"]}]
`), env(nil))
	require.NoError(t, err)
	p, _ := c.Provider("p")
	assert.True(t, p.ResponsesAPI)
	assert.Equal(t, DefaultResponseRetention, c.ResponseRetention.D(), "30 days unless set")

	_, err = Parse([]byte(`
providers: [{name: a, type: anthropic, base_url: "http://x", responses_api: true}]
models: [{id: m, max_tokens: 10, deployments: [{provider: a, model: m}]}]
plans: [{name: free, models: ["*"]}]
`), env(nil))
	assert.ErrorContains(t, err, "responses_api")
	_, err = Parse([]byte(`
response_retention: 10s
providers: [{name: p, type: openai, base_url: "http://x/v1"}]
models: [{id: m, max_tokens: 10, deployments: [{provider: p, model: m}]}]
plans: [{name: free, models: ["*"]}]
`), env(nil))
	assert.ErrorContains(t, err, "response_retention")
}

// TestHoldSettingsGetDefaultsAndAreChecked: a model's image_tokens defaults
// to the largest of its providers' types; allow_parameters names only
// price-changing parameters, and a provider's allowance applies to a model
// only when every provider of it allows the parameter.
func TestHoldSettingsGetDefaultsAndAreChecked(t *testing.T) {
	base := `
providers:
  - {name: o, type: openai, base_url: "http://o/v1", allow_parameters: [store]}
  - {name: a, type: anthropic, base_url: "http://a"}
  - {name: g, type: gemini, base_url: "http://g"}
models:
  - {id: both, max_tokens: 1, deployments: [{provider: a, model: x}, {provider: g, model: y}]}
  - {id: claude, max_tokens: 1, deployments: [{provider: a, model: x}]}
  - {id: own, max_tokens: 1, image_tokens: 10, reasoning: true, deployments: [{provider: o, model: x}]}
  - {id: mixed, max_tokens: 1, deployments: [{provider: o, model: x}, {provider: a, model: z}]}
plans: [{name: p, models: ["*"]}]
`
	c, err := Parse([]byte(base), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	m := func(id string) *Model { mm, ok := c.Model(id); require.True(t, ok); return mm }
	assert.Equal(t, 4128, m("both").ImageTokens, "the larger of Anthropic's and Gemini's")
	assert.Equal(t, 1600, m("claude").ImageTokens)
	assert.Equal(t, 10, m("own").ImageTokens)
	assert.True(t, m("own").Reasoning)
	assert.True(t, m("own").Allows("store"), "its only provider allows it")
	assert.False(t, m("mixed").Allows("store"), "not every provider of it does")

	for _, bad := range []string{
		strings.Replace(base, "allow_parameters: [store]", "allow_parameters: [temperature]", 1),
		strings.Replace(base, "image_tokens: 10", "image_tokens: -1", 1),
		strings.Replace(base, "image_tokens: 10", "file_tokens: -1", 1),
		strings.Replace(base, "image_tokens: 10", "allow_parameters: [stor]", 1),
	} {
		_, err := Parse([]byte(bad), func(string) (string, bool) { return "", false })
		var fe *FieldError
		require.ErrorAs(t, err, &fe, "%s", bad)
	}
}

// TestContextWindowDefaultsToTheLargestOfItsProvidersAndMustBePositive:
// a model's context_window defaults to the largest window of its
// providers' types (a default too small would hold less than a provider
// can bill); one set is kept; zero is the default; a negative one is
// refused with the field named.
func TestContextWindowDefaultsToTheLargestOfItsProvidersAndMustBePositive(t *testing.T) {
	base := `
providers:
  - {name: o, type: openai, base_url: "http://o/v1"}
  - {name: a, type: anthropic, base_url: "http://a"}
  - {name: g, type: gemini, base_url: "http://g"}
  - {name: d, type: demo}
models:
  - {id: gpt, max_tokens: 1, deployments: [{provider: o, model: x}]}
  - {id: claude, max_tokens: 1, deployments: [{provider: a, model: x}]}
  - {id: gemini, max_tokens: 1, deployments: [{provider: g, model: x}]}
  - {id: demo, max_tokens: 1, deployments: [{provider: d, model: x}]}
  - {id: both, max_tokens: 1, deployments: [{provider: a, model: x}, {provider: g, model: y}]}
  - {id: own, max_tokens: 1, context_window: 8192, deployments: [{provider: o, model: x}]}
  - {id: zero, max_tokens: 1, context_window: 0, deployments: [{provider: a, model: x}]}
plans: [{name: p, models: ["*"]}]
`
	c, err := Parse([]byte(base), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	for _, tc := range []struct {
		model string
		want  int
	}{
		{"gpt", 1 << 20},
		{"claude", 1_000_000},
		{"gemini", 1_114_112},
		{"demo", 1 << 20},
		{"both", 1_114_112},
		{"own", 8192},
		{"zero", 1_000_000},
	} {
		m, ok := c.Model(tc.model)
		require.True(t, ok)
		assert.Equal(t, tc.want, m.ContextWindow, tc.model)
	}

	bad := strings.Replace(base, "context_window: 8192", "context_window: -1", 1)
	_, err = Parse([]byte(bad), func(string) (string, bool) { return "", false })
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, err.Error(), "context_window")
	assert.Contains(t, err.Error(), "must be positive")
}

func TestLimitsHaveDefaultsAndCanBeSet(t *testing.T) {
	c, err := Parse([]byte(valid), env(map[string]string{"OPENAI_API_KEY": "k"}))
	require.NoError(t, err)
	assert.Equal(t, Limits{KeysPerAccount: 1000, TokensPerAccount: 50, ManagementRPM: 600}, c.Limits)

	c, err = Parse([]byte("limits: {keys_per_account: 3, tokens_per_account: 2, management_rpm: 10}\n"+valid), env(map[string]string{"OPENAI_API_KEY": "k"}))
	require.NoError(t, err)
	assert.Equal(t, Limits{KeysPerAccount: 3, TokensPerAccount: 2, ManagementRPM: 10}, c.Limits)
}

// A model is found by its id, an exact alias, or the longest prefix alias
// (the dated names Claude Code and the SDKs send), and is served as its id.
func TestAModelIsFoundByItsAliases(t *testing.T) {
	cfg := strings.Replace(valid, "  - id: gpt-4o-mini\n", `  - id: claude-sonnet
    aliases: [sonnet, "claude-sonnet-4-5*"]
    max_tokens: 64000
    input_price_per_million: 3
    output_price_per_million: 15
    deployments:
      - provider: openai
        model: m
  - id: claude-sonnet-45-dated
    aliases: ["claude-sonnet-4-5-2025*"]
    max_tokens: 64000
    input_price_per_million: 3
    output_price_per_million: 15
    deployments:
      - provider: openai
        model: m
  - id: gpt-4o-mini
`, 1)
	c, err := Parse([]byte(cfg), env(map[string]string{"OPENAI_API_KEY": "sk-test"}))
	require.NoError(t, err)
	for asked, want := range map[string]string{
		"claude-sonnet":              "claude-sonnet",
		"sonnet":                     "claude-sonnet",
		"claude-sonnet-4-5":          "claude-sonnet",
		"claude-sonnet-4-5-20250929": "claude-sonnet-45-dated",
		"claude-sonnet-4-5-latest":   "claude-sonnet",
		"gpt-4o-mini":                "gpt-4o-mini",
	} {
		m, ok := c.Model(asked)
		if assert.True(t, ok, asked) {
			assert.Equal(t, want, m.ID, asked)
		}
	}
	for _, unknown := range []string{"claude-sonnet-4", "sonnet-4", "claude", "gpt-4o"} {
		_, ok := c.Model(unknown)
		assert.False(t, ok, unknown)
	}
}

// A model's deployments must be on provider types that serve its kind.
func TestAKindIsServedOnlyByItsProviderTypes(t *testing.T) {
	_, err := Parse([]byte(`
providers: [{name: a, type: anthropic, base_url: "http://x", api_key: k}]
models: [{id: e, kind: embedding, deployments: [{provider: a, model: m}]}]
plans: [{name: free, models: ["*"]}]
`), env(nil))
	assert.ErrorContains(t, err, `models[0] (e).deployments[0].provider: "a" (type anthropic) serves no embedding models (types openai, azure, gemini, demo, bedrock, vertex do)`)
	c, err := Parse([]byte(`
providers: [{name: g, type: gemini, base_url: "http://x", api_key: k}]
models: [{id: e, kind: embedding, input_price_per_million: 0.02, deployments: [{provider: g, model: text-embedding-004}]}]
plans: [{name: free, models: ["*"]}]
`), env(nil))
	require.NoError(t, err)
	m, _ := c.Model("e")
	assert.Equal(t, KindEmbedding, m.Kind)
	assert.False(t, m.Generates())
}

// Vertex serves embedding models (Google's); Claude on Vertex serves chat
// only.
func TestVertexServesEmbeddingsButNotWithClaude(t *testing.T) {
	const cfg = `
providers: [{name: v, type: vertex, project: p, region: us-central1}]
models: [{id: e, kind: embedding, input_price_per_million: 0.02, deployments: [{provider: v, model: %s}]}]
plans: [{name: free, models: ["*"]}]
`
	c, err := Parse([]byte(fmt.Sprintf(cfg, "text-embedding-005")), env(nil))
	require.NoError(t, err)
	m, _ := c.Model("e")
	assert.Equal(t, KindEmbedding, m.Kind)
	_, err = Parse([]byte(fmt.Sprintf(cfg, "claude-sonnet-4-5@20250929")), env(nil))
	assert.ErrorContains(t, err, `models[0] (e).deployments[0].model: "claude-sonnet-4-5@20250929" is Claude, which serves chat models only on Vertex`)
}
