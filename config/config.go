// Package config reads and validates Tollgate's YAML configuration: the key
// prefix, the providers, the public models with their prices and deployments,
// and the plans. Parse is pure; nothing in the request path reads the
// environment or files.
package config

import (
	"strings"
	"time"

	"github.com/tollgate/tollgate/money"
)

// Provider types.
const (
	TypeOpenAI    = "openai"
	TypeAzure     = "azure"
	TypeAnthropic = "anthropic"
	TypeGemini    = "gemini"
	// TypeDemo is Tollgate's built-in demo provider: a deterministic
	// OpenAI-type server (internal/mockllm) that tollgate serve answers in
	// process, offline. It takes no base_url and no api_key.
	TypeDemo = "demo"
	// TypeVertex is Google Vertex AI: Gemini models, and Claude models
	// (those whose name begins with claude-), with Google's Application
	// Default Credentials.
	TypeVertex = "vertex"
	// TypeBedrock is Amazon Bedrock's Converse API, signed with SigV4 (or
	// a Bedrock API key).
	TypeBedrock = "bedrock"
)

// DemoBaseURL is every demo provider's base URL: a name that resolves
// nowhere (.invalid), which the built-in edge answers in process; behind
// Envoy, tollgate serve points demo providers at a loopback listener of
// its own instead (see cmd/tollgate/app).
const DemoBaseURL = "http://demo.tollgate.invalid/v1"

// Defaults applied where the file is silent.
const (
	DefaultMaxBodyBytes = 4 << 20 // 4 MiB request body limit
	// DefaultResponseRetention keeps a stored response of the Responses API
	// 30 days, as OpenAI does.
	DefaultResponseRetention = 30 * 24 * time.Hour
	DefaultAzureVersion      = "2024-10-21"

	// Per-attempt timeouts of a provider, and a model's whole-request
	// timeout (every attempt included).
	DefaultConnectTimeout    = 5 * time.Second
	DefaultFirstByteTimeout  = 60 * time.Second
	DefaultStreamIdleTimeout = 60 * time.Second
	DefaultRequestTimeout    = 10 * time.Minute

	// What one account may hold, and how often one management token may
	// call the management API (/api/v1) per minute.
	DefaultKeysPerAccount   = 1000
	DefaultTokensPerAccount = 50
	DefaultManagementRPM    = 600
)

// Duration is a time.Duration written in the file as a Go duration string
// ("5s", "1m30s").
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Config is a validated configuration.
type Config struct {
	// KeyPrefix begins every key secret; default "tg".
	KeyPrefix string     `yaml:"key_prefix"`
	Providers []Provider `yaml:"providers"`
	Models    []Model    `yaml:"models"`
	Plans     []Plan     `yaml:"plans"`
	// MaxBodyBytes caps a request body; default 4 MiB.
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// ResponseRetention is how long a stored response of the Responses API
	// (store: true) is kept for GET /v1/responses/{id} and
	// previous_response_id; default 30 days (720h).
	ResponseRetention Duration `yaml:"response_retention"`
	// Limits bound what one account may hold and how fast the management
	// API answers one token.
	Limits Limits `yaml:"limits"`
	// Dashboard are the dashboard's settings (config/dashboard.go).
	Dashboard Dashboard `yaml:"dashboard"`
	// Alerts configure the webhook deliveries of alerts.
	Alerts Alerts `yaml:"alerts"`
	// SSO is single sign-on to the dashboard (config/sso.go).
	SSO SSO `yaml:"sso"`
	// SMTP, when set, sends invitations by mail (config/smtp.go).
	SMTP *SMTP `yaml:"smtp"`
	// LoadedAt is when the configuration was parsed: the created time of
	// the models that give none.
	LoadedAt time.Time `yaml:"-"`

	providers map[string]*Provider
	models    map[string]*Model
	// aliases are the models' exact aliases; aliasPrefixes their
	// prefix aliases ("claude-sonnet-4-5*"), longest first.
	aliases       map[string]*Model
	aliasPrefixes []aliasPrefix
	plans         map[string]*Plan
}

// Limits are per account and per management token. Zero takes the
// default; each must be at least 1.
type Limits struct {
	// KeysPerAccount caps an account's keys (deleted ones do not count);
	// default 1000.
	KeysPerAccount int `yaml:"keys_per_account"`
	// TokensPerAccount caps an account's management tokens (revoked ones
	// do not count; admin tokens belong to no account); default 50.
	TokensPerAccount int `yaml:"tokens_per_account"`
	// ManagementRPM is how many calls one management token may make to
	// /api/v1 per minute (answered 429 beyond); default 600.
	ManagementRPM int `yaml:"management_rpm"`
}

// Provider is an upstream API and its credential.
type Provider struct {
	Name string `yaml:"name"`
	// Type is openai (also any OpenAI-compatible server), azure, anthropic,
	// gemini, demo (TypeDemo), vertex (TypeVertex) or bedrock (TypeBedrock); a profile's name (Profiles) is read as
	// openai with that Profile.
	Type    string `yaml:"type"`
	BaseURL string `yaml:"base_url"`
	// APIKey is the credential; ${VAR} expands from the environment. Never logged.
	APIKey Secret `yaml:"api_key"`
	// APIVersion is Azure's api-version (default 2024-10-21) or Anthropic's
	// anthropic-version header (default 2023-06-01).
	APIVersion string `yaml:"api_version"`
	// Enabled is an administrator's switch; a disabled provider serves nothing.
	// Default true.
	Enabled *bool `yaml:"enabled"`

	// ConnectTimeout bounds the TCP and TLS handshake of one attempt;
	// default 5s.
	ConnectTimeout Duration `yaml:"connect_timeout"`
	// FirstByteTimeout bounds one attempt from the request sent to the
	// response headers; default 60s. An attempt that times out counts as a
	// failure of the deployment and fails over while nothing has reached
	// the client.
	FirstByteTimeout Duration `yaml:"first_byte_timeout"`
	// StreamIdleTimeout is the longest silence allowed between two pieces
	// of a response body; default 60s.
	StreamIdleTimeout Duration `yaml:"stream_idle_timeout"`
	// ForwardHeaders names client request headers that reach this provider
	// as the client sent them. Every other client header stays at the edge
	// (only content type, accept and trace context pass, and the provider's
	// own credential and version headers are Tollgate's). Lowercased by
	// Parse.
	ForwardHeaders []string `yaml:"forward_headers"`
	// ResponsesAPI says this OpenAI-type server speaks the Responses API
	// (POST {base_url}/responses), as OpenAI does: /v1/responses requests
	// then reach it as Responses requests (model and credential rewritten)
	// instead of being translated to chat completions. Default false, as
	// most OpenAI-compatible servers speak chat only.
	ResponsesAPI bool `yaml:"responses_api"`
	// RerankAPI is the rerank wire format of this OpenAI-type server:
	// RerankCohere (the default: Cohere's v2 shape, which Cohere, Jina,
	// vLLM, Infinity and TEI take at {base_url}/rerank) or RerankVoyage
	// (Voyage AI's: top_k, string documents, an answer under "data"),
	// to which /v1/rerank requests are translated.
	RerankAPI string `yaml:"rerank_api"`
	// AllowParameters names price-changing parameters (UnpricedParameters)
	// that every model served only by this provider lets through; see
	// Model.AllowParameters.
	AllowParameters []string `yaml:"allow_parameters"`
	// Profile names the OpenAI-compatible server an openai-type provider
	// is (Profiles: mistral, groq…). Writing the profile's name as the
	// type sets it.
	Profile string `yaml:"profile"`
	// StreamUsage says whether Tollgate asks this openai-type provider for
	// a stream's usage with stream_options.include_usage. Default true, or
	// the profile's default (false for servers that refuse the field);
	// without it, a stream is metered from the usage the server sends
	// anyway, else estimated.
	StreamUsage *bool `yaml:"stream_usage"`

	// Project is a vertex provider's Google Cloud project id.
	Project string `yaml:"project"`
	// Region is a vertex provider's location (us-central1, europe-west4,
	// …, or global; location is the same field under Google's name), or a
	// bedrock provider's AWS region (required): its default base_url
	// (https://bedrock-runtime.{region}.amazonaws.com) and the region its
	// requests are signed for.
	Region   string `yaml:"region"`
	Location string `yaml:"location"`
	// CredentialsFile names a vertex provider's Google credential file (a
	// service account's JSON key); empty means Application Default
	// Credentials (GOOGLE_APPLICATION_CREDENTIALS, workload identity, the
	// metadata server).
	CredentialsFile string `yaml:"credentials_file"`
	// AccessKeyID and SecretAccessKey are a bedrock provider's static AWS
	// credentials (both or neither; ${VAR} expands). Without them (and
	// without api_key) the AWS SDK's default chain is used: environment,
	// shared profile, web identity (IRSA), container and instance roles.
	// Never logged.
	AccessKeyID     Secret `yaml:"access_key_id"`
	SecretAccessKey Secret `yaml:"secret_access_key"`
}

// IsEnabled reports the administrator's switch (true unless set to false).
func (p *Provider) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// PlanModels are the models the plan allows, in the configuration's order;
// none for an unknown plan. The dashboard's and the management API's model
// lists are this list.
func (c *Config) PlanModels(plan string) []*Model {
	p, ok := c.Plan(plan)
	if !ok {
		return nil
	}
	var out []*Model
	for i := range c.Models {
		if p.AllowsModel(c.Models[i].ID) {
			out = append(out, &c.Models[i])
		}
	}
	return out
}

// ModelAvailable reports whether a request for m can be served now: some
// deployment of m belongs to an enabled provider and, when available is not
// nil, available(deployment ID) says it is up (the passive health of
// deployments). Admission, GET /v1/models and the dashboard's model list all
// ask this one question.
func (c *Config) ModelAvailable(m *Model, available func(deploymentID string) bool) bool {
	for i := range m.Deployments {
		d := &m.Deployments[i]
		p, ok := c.Provider(d.Provider)
		if !ok || !p.IsEnabled() {
			continue
		}
		if available == nil || available(d.ID) {
			return true
		}
	}
	return false
}

// Secret is a credential that never prints itself.
type Secret string

// String hides the value.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the value from %#v too.
func (s Secret) GoString() string { return s.String() }

// Reveal returns the credential for the one place that sends it upstream.
func (s Secret) Reveal() string { return string(s) }

// Model is a public model id, its limits and prices, and the deployments that
// serve it.
type Model struct {
	ID string `yaml:"id"`
	// Aliases are other names a client may ask for this model by (the
	// names Claude Code or an SDK sends, the provider's dated names); one
	// ending in "*" stands for every name it begins (claude-sonnet-4-5*
	// takes claude-sonnet-4-5-20250929). The request is served, held,
	// recorded and allowed as the model's id.
	Aliases []string `yaml:"aliases"`
	// Kind is what the model serves (KindChat, the default, and the other
	// Kind constants): a request on another kind's path is refused,
	// naming the path that serves the model.
	Kind string `yaml:"kind"`
	// MaxTokens is the model's maximum for max_tokens (chat and
	// completion models; the others generate no tokens).
	MaxTokens             int         `yaml:"max_tokens"`
	InputPricePerMillion  money.Nanos `yaml:"input_price_per_million"`
	OutputPricePerMillion money.Nanos `yaml:"output_price_per_million"`
	// SearchUnitPrice prices a rerank model per search unit, Cohere's
	// billing unit (a query with up to 100 documents; a document longer
	// than 500 tokens with the query counts once per 500); zero prices it
	// per token at InputPricePerMillion, as Jina, Voyage and self-hosted
	// rerankers count.
	SearchUnitPrice money.Nanos `yaml:"search_unit_price"`
	// CachedInputPricePerMillion prices prompt tokens the provider read
	// from its prompt cache (OpenAI's cached_tokens, Anthropic's cache
	// reads, Gemini's cachedContentTokenCount); default the input price.
	CachedInputPricePerMillion money.Nanos `yaml:"cached_input_price_per_million"`
	// CacheWritePricePerMillion prices prompt tokens written to the cache
	// (Anthropic's cache_creation_input_tokens); default the input price.
	CacheWritePricePerMillion money.Nanos  `yaml:"cache_write_price_per_million"`
	Deployments               []Deployment `yaml:"deployments"`
	// RequestTimeout bounds the whole request, every attempt included;
	// default 10m.
	RequestTimeout Duration `yaml:"request_timeout"`
	// Created is the model's creation date for GET /v1/models (a YAML
	// date, 2024-07-18, or time); default the configuration's load time.
	Created time.Time `yaml:"created"`
	// Reasoning marks a model that spends hidden reasoning tokens (OpenAI's
	// o-series and gpt-5, Gemini's thinking models, Claude with extended
	// thinking): OpenAI-type providers get the output limit as
	// max_completion_tokens, and an answer cut off before the provider
	// reported its usage is billed its whole held output.
	Reasoning bool `yaml:"reasoning"`
	// ImageTokens is the most prompt tokens one image can cost; the hold
	// counts it for every image part. Default: the largest of
	// DefaultImageTokens over the model's providers' types.
	ImageTokens int `yaml:"image_tokens"`
	// FileTokens is the most prompt tokens one file part (a PDF…) can
	// cost; 0 (the default) refuses file parts, whose cost the body's size
	// does not show.
	FileTokens int `yaml:"file_tokens"`
	// ContextWindow is the most prompt tokens plus max_tokens a request to
	// the model can add up to: its providers refuse a request past it
	// (Gemini, whose input and output limits are apart, at their sum).
	// The hold never counts a prompt larger than the window less the held
	// output limit, and a request whose output limit alone fills the
	// window is refused. Default: the largest of DefaultContextWindow over
	// the model's providers' types.
	ContextWindow int `yaml:"context_window"`
	// AllowParameters names price-changing parameters (UnpricedParameters)
	// that requests for this model may set: the operator has priced the
	// model for them (e.g. audio on an audio model whose prices are its
	// audio prices) or accepts what they cost. A parameter is also allowed
	// when every deployment's provider allows it.
	AllowParameters []string `yaml:"allow_parameters"`

	allowed map[string]bool
}

// Rerank wire formats (Provider.RerankAPI).
const (
	RerankCohere = "cohere"
	RerankVoyage = "voyage"
)

// Model kinds: what a model serves, each on its own paths.
const (
	// KindChat serves chat completions, the Responses API and the
	// Messages API.
	KindChat = "chat"
	// KindCompletion serves legacy completions (POST /v1/completions).
	KindCompletion = "completion"
	// KindEmbedding serves POST /v1/embeddings.
	KindEmbedding = "embedding"
	// KindModeration serves POST /v1/moderations.
	KindModeration = "moderation"
	// KindRerank serves POST /v1/rerank.
	KindRerank = "rerank"
)

// KindProviders are the provider types that serve each kind of model.
var KindProviders = map[string][]string{
	KindChat:       {TypeOpenAI, TypeAzure, TypeAnthropic, TypeGemini, TypeDemo, TypeVertex, TypeBedrock},
	KindCompletion: {TypeOpenAI, TypeAzure, TypeDemo},
	KindEmbedding:  {TypeOpenAI, TypeAzure, TypeGemini, TypeDemo, TypeBedrock, TypeVertex},
	KindModeration: {TypeOpenAI, TypeAzure, TypeDemo},
	KindRerank:     {TypeOpenAI, TypeDemo},
}

// Generates reports whether the model's kind writes tokens (chat and
// completion models), so that it has a max_tokens and an output price.
func (m *Model) Generates() bool { return m.Kind == KindChat || m.Kind == KindCompletion }

// CreatedAt is the model's created time as GET /v1/models reports it.
func (c *Config) CreatedAt(m *Model) time.Time {
	if !m.Created.IsZero() {
		return m.Created
	}
	return c.LoadedAt
}

// Deployment is one provider serving a model under the provider's own name.
type Deployment struct {
	Provider string `yaml:"provider"`
	// Model is the provider's name for the model (Azure: the deployment name).
	Model string `yaml:"model"`
	// Priority: lower is tried first; default 0.
	Priority int `yaml:"priority"`
	// Weight balances deployments of equal priority; default 1.
	Weight int `yaml:"weight"`

	// ID is assigned by Parse: DeploymentID(model, provider, provider's
	// model). It names the deployment's circuit and Envoy endpoint and is
	// stable across reloads that reorder deployments.
	ID string `yaml:"-"`
}

// Plan is a subscription plan.
type Plan struct {
	Name string `yaml:"name"`
	// DefaultRPM applies to keys whose Rate Limit is Off; 0 means unlimited.
	DefaultRPM int `yaml:"default_rpm"`
	// DefaultTPM and DefaultTokensPerDay apply to keys whose token limits
	// are Off (tokens per UTC minute and per UTC day, prompt plus
	// completion); 0 means unlimited.
	DefaultTPM          int64 `yaml:"default_tpm"`
	DefaultTokensPerDay int64 `yaml:"default_tokens_per_day"`
	// Models are the model ids the plan may use; "*" means every model.
	Models []string `yaml:"models"`
	// DefaultKeyBudgets are the spend budgets every new key of the plan's
	// accounts gets (plan_budgets.go).
	DefaultKeyBudgets []PlanBudget `yaml:"default_key_budgets"`
}

// AllowsModel reports whether the plan covers the model id.
func (p *Plan) AllowsModel(id string) bool {
	for _, m := range p.Models {
		if m == "*" || m == id {
			return true
		}
	}
	return false
}

// Provider returns the named provider.
func (c *Config) Provider(name string) (*Provider, bool) {
	p, ok := c.providers[name]
	return p, ok
}

// Model returns the public model with this id, or with this alias: an
// id first, then an exact alias, then the longest prefix alias.
func (c *Config) Model(id string) (*Model, bool) {
	if m, ok := c.models[id]; ok {
		return m, true
	}
	if m, ok := c.aliases[id]; ok {
		return m, true
	}
	for _, p := range c.aliasPrefixes {
		if strings.HasPrefix(id, p.prefix) {
			return p.model, true
		}
	}
	return nil, false
}

// aliasPrefix is a prefix alias and its model.
type aliasPrefix struct {
	prefix string
	model  *Model
}

// Plan returns the named plan.
func (c *Config) Plan(name string) (*Plan, bool) {
	p, ok := c.plans[name]
	return p, ok
}

// DeploymentID is the stable identity of a deployment: the public model,
// the provider's name and the provider's model. It does not depend on the
// deployment's position in the file, so a reload that reorders deployments
// keeps every circuit and never sends one provider's credential to
// another's host.
func DeploymentID(modelID, providerName, providerModel string) string {
	return modelID + "#" + providerName + "/" + providerModel
}

// OnlyDeployment is the model's one deployment of an enabled provider,
// with its provider, when it has exactly one: such a model needs no
// failover, and Envoy routes its requests straight to that deployment
// (contract.DirectClusterName), the router step doing the attempt's work.
func (c *Config) OnlyDeployment(m *Model) (*Deployment, *Provider, bool) {
	var dep *Deployment
	var prov *Provider
	for i := range m.Deployments {
		p, ok := c.providers[m.Deployments[i].Provider]
		if !ok || !p.IsEnabled() {
			continue
		}
		if dep != nil {
			return nil, nil, false
		}
		dep, prov = &m.Deployments[i], p
	}
	return dep, prov, dep != nil
}

// Deployment finds a deployment by its ID, with its model and provider.
func (c *Config) Deployment(id string) (*Model, *Deployment, *Provider, bool) {
	modelID, _, ok := strings.Cut(id, "#")
	if !ok {
		return nil, nil, nil, false
	}
	m, ok := c.models[modelID]
	if !ok {
		return nil, nil, nil, false
	}
	for i := range m.Deployments {
		d := &m.Deployments[i]
		if d.ID == id {
			p := c.providers[d.Provider]
			return m, d, p, true
		}
	}
	return nil, nil, nil, false
}
