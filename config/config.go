// Package config reads and validates Tollgate's YAML configuration: the key
// prefix, the providers, the public models with their prices and deployments,
// and the plans. Parse is pure; nothing in the request path reads the
// environment or files.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/apikey"
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

// UnmarshalYAML reads a Go duration string.
func (d *Duration) UnmarshalYAML(value *yaml.Node) error {
	if value.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: a duration must be a string such as \"30s\"", value.Line)
	}
	v, err := time.ParseDuration(value.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (write it as \"30s\", \"2m\" or \"1m30s\")", value.Line, value.Value)
	}
	*d = Duration(v)
	return nil
}

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
	// LoadedAt is when the configuration was parsed: the created time of
	// the models that give none.
	LoadedAt time.Time `yaml:"-"`

	providers map[string]*Provider
	models    map[string]*Model
	plans     map[string]*Plan
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

// validate fills the defaults and refuses values below 1.
func (l *Limits) validate() error {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"keys_per_account", &l.KeysPerAccount, DefaultKeysPerAccount},
		{"tokens_per_account", &l.TokensPerAccount, DefaultTokensPerAccount},
		{"management_rpm", &l.ManagementRPM, DefaultManagementRPM},
	} {
		if *f.v == 0 {
			*f.v = f.def
		}
		if *f.v < 1 {
			return fieldErr("limits."+f.name, "must be at least 1, got %d", *f.v)
		}
	}
	return nil
}

// Provider is an upstream API and its credential.
type Provider struct {
	Name string `yaml:"name"`
	// Type is openai (also any OpenAI-compatible server), azure, anthropic,
	// gemini, or demo (TypeDemo).
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
	// AllowParameters names price-changing parameters (UnpricedParameters)
	// that every model served only by this provider lets through; see
	// Model.AllowParameters.
	AllowParameters []string `yaml:"allow_parameters"`
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
	// MaxTokens is the model's maximum for max_tokens.
	MaxTokens             int         `yaml:"max_tokens"`
	InputPricePerMillion  money.Nanos `yaml:"input_price_per_million"`
	OutputPricePerMillion money.Nanos `yaml:"output_price_per_million"`
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

// UnpricedParameters are the request parameters whose price Tollgate's
// per-token prices do not cover; a request that sets one is refused
// unless the model allows it (AllowParameters):
//   - service_tier other than auto or default (priority and flex tiers
//     have their own prices);
//   - audio: audio output (modalities with "audio", the audio parameter)
//     and input_audio parts, priced per token far above text;
//   - store: true keeps the prompt and answer in the provider's account
//     (the operator's), for its own tools;
//   - prediction: rejected predicted tokens are billed as completion
//     tokens beyond what the answer shows;
//   - web_search_options: each search is billed per call, and its
//     results as prompt tokens the body does not show;
//   - moderation: runs a moderation model over input and output, which
//     OpenAI may bill apart.
var UnpricedParameters = []string{"service_tier", "audio", "store", "prediction", "web_search_options", "moderation"}

// Allows reports whether requests for the model may set the unpriced
// parameter (one of UnpricedParameters).
func (m *Model) Allows(param string) bool { return m.allowed[param] }

// DefaultImageTokens is the most prompt tokens one image costs at each
// provider type, from the providers' published rules:
//   - openai, azure (and demo, counted as openai): 3,779 — patch-based
//     models count up to 1,536 32-px patches times the model's multiplier
//     (2.46 for gpt-4.1-nano and gpt-5-nano, the largest); tile-based models (gpt-4o, o1, o3) at most
//     85 + 170 × 8 tiles = 1,445. gpt-4o-mini counts an image as 2,833 +
//     5,667 per tile (up to 48,169) at a lower price: set its image_tokens.
//   - anthropic: 1,600 — width × height / 750, images being scaled to at
//     most about 1.15 megapixels.
//   - gemini: 4,128 — 258 per 768-px tile, images being scaled to at most
//     3072 × 3072 (16 tiles); Gemini 3's high media resolution is 1,120.
var DefaultImageTokens = map[string]int{TypeOpenAI: 3779, TypeAzure: 3779, TypeAnthropic: 1600, TypeGemini: 4128, TypeDemo: 3779}

// DefaultContextWindow is the largest context window of each provider
// type's current models, so that a default never holds less than a
// model's provider can bill:
//   - openai, azure (and demo): 1,048,576 — gpt-4.1's 1,047,576 is the
//     largest (gpt-5 400,000, gpt-4o 128,000). An OpenAI-compatible server
//     with a larger window needs its context_window.
//   - anthropic: 1,000,000 — Claude's long-context window (200,000
//     without it).
//   - gemini: 1,114,112 — Gemini 2.5's and 3's input limit of 1,048,576
//     plus their output limit of 65,536.
var DefaultContextWindow = map[string]int{TypeOpenAI: 1 << 20, TypeAzure: 1 << 20, TypeAnthropic: 1_000_000, TypeGemini: 1_048_576 + 65_536, TypeDemo: 1 << 20}

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

// Model returns the public model with this id.
func (c *Config) Model(id string) (*Model, bool) {
	m, ok := c.models[id]
	return m, ok
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

// Load reads and parses the file at path, expanding ${VAR} from the process
// environment.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c, err := Parse(data, os.LookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// envRef matches ${VAR} and ${VAR:-default}.
var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-[^}]*)?\}`)

// Parse decodes and validates a configuration. ${VAR} references in the text
// are expanded with lookup; a reference to an unset variable is an error,
// unless it names a default: ${VAR:-default} (the default may be empty).
// Every error names the field it is about.
func Parse(data []byte, lookup func(string) (string, bool)) (*Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, errors.New("config: the file is empty")
	}
	// Expand ${VAR} inside scalars only, so a value with characters YAML
	// treats specially (a '#' or ': ' in a credential) cannot change the
	// document's structure.
	var missing []string
	expandScalars(&doc, func(s string) string {
		return envRef.ReplaceAllStringFunc(s, func(ref string) string {
			m := envRef.FindStringSubmatch(ref)
			name, def := m[1], m[2]
			v, ok := lookup(name)
			switch {
			case ok && v != "":
				return v
			case def != "":
				return def[2:] // ${VAR:-default}: unset or empty gives the default
			case ok:
				return v
			}
			missing = append(missing, name)
			return ""
		})
	})
	if len(missing) > 0 {
		return nil, fmt.Errorf("config: environment variable %s is not set", strings.Join(missing, ", "))
	}
	expanded, err := yaml.Marshal(&doc)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c Config
	dec := yaml.NewDecoder(bytes.NewReader(expanded))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	c.LoadedAt = time.Now().UTC().Truncate(time.Second)
	return &c, nil
}

func expandScalars(n *yaml.Node, f func(string) string) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = f(n.Value)
		n.Tag, n.Style = "", 0 // let the expanded text resolve (and quote itself) as YAML would
	}
	for _, c := range n.Content {
		expandScalars(c, f)
	}
}

func (c *Config) validate() error {
	if c.KeyPrefix == "" {
		c.KeyPrefix = apikey.DefaultPrefix
	}
	if !apikey.ValidPrefix(c.KeyPrefix) {
		return fieldErr("key_prefix", "must match [a-z0-9]{1,16}, got %q", c.KeyPrefix)
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	switch {
	case c.ResponseRetention == 0:
		c.ResponseRetention = Duration(DefaultResponseRetention)
	case c.ResponseRetention < Duration(time.Minute):
		return fieldErr("response_retention", "must be at least 1m, got %s", c.ResponseRetention.D())
	}
	if c.MaxBodyBytes < 1024 {
		return fieldErr("max_body_bytes", "must be at least 1024, got %d", c.MaxBodyBytes)
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	if err := c.Dashboard.validate(); err != nil {
		return err
	}
	if err := c.Alerts.validate(); err != nil {
		return err
	}

	if err := c.validateProviders(); err != nil {
		return err
	}
	if err := c.validateModels(); err != nil {
		return err
	}
	return c.validatePlans()
}

// validateProviders checks and completes every provider, and indexes
// them by name.
func (c *Config) validateProviders() error {
	c.providers = make(map[string]*Provider, len(c.Providers))
	for i := range c.Providers {
		p := &c.Providers[i]
		f, err := namedEntry("providers", i, "name", p.Name, c.providers)
		if err != nil {
			return err
		}
		if err := validateProvider(f, p); err != nil {
			return err
		}
		c.providers[p.Name] = p
	}
	return nil
}

// validateProvider checks and completes the provider at field f.
func validateProvider(f string, p *Provider) error {
	switch p.Type {
	case TypeOpenAI, TypeAzure, TypeAnthropic, TypeGemini:
	case TypeDemo:
		if err := completeDemo(f, p); err != nil {
			return err
		}
	case "":
		return fieldErr(f+".type", "is required (openai, azure, anthropic, gemini or demo)")
	default:
		return fieldErr(f+".type", "must be openai, azure, anthropic, gemini or demo, got %q", p.Type)
	}
	if p.BaseURL == "" {
		return fieldErr(f+".base_url", "is required")
	}
	if p.ResponsesAPI && p.Type != TypeOpenAI {
		return fieldErr(f+".responses_api", "is for openai-type providers only; %s providers are served by translation", p.Type)
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fieldErr(f+".base_url", "must be an http(s) URL without query, got %q", p.BaseURL)
	}
	p.BaseURL = strings.TrimRight(p.BaseURL, "/")
	for _, t := range []struct {
		name string
		d    *Duration
		def  time.Duration
	}{
		{"connect_timeout", &p.ConnectTimeout, DefaultConnectTimeout},
		{"first_byte_timeout", &p.FirstByteTimeout, DefaultFirstByteTimeout},
		{"stream_idle_timeout", &p.StreamIdleTimeout, DefaultStreamIdleTimeout},
	} {
		if *t.d == 0 {
			*t.d = Duration(t.def)
		}
		if *t.d < 0 {
			return fieldErr(f+"."+t.name, "must be positive, got %s", t.d.D())
		}
	}
	for j, h := range p.ForwardHeaders {
		h = strings.ToLower(strings.TrimSpace(h))
		if !validHeaderName(h) {
			return fieldErr(fmt.Sprintf("%s.forward_headers[%d]", f, j), "%q is not a header name", p.ForwardHeaders[j])
		}
		if strings.HasPrefix(h, "x-tollgate-") || h == "host" || h == "content-length" || h == "transfer-encoding" || h == "connection" {
			return fieldErr(fmt.Sprintf("%s.forward_headers[%d]", f, j), "%q is Tollgate's to set and cannot be forwarded", h)
		}
		p.ForwardHeaders[j] = h
	}
	if err := checkAllowed(f+".allow_parameters", p.AllowParameters); err != nil {
		return err
	}
	if p.Type == TypeAzure && p.APIVersion == "" {
		p.APIVersion = DefaultAzureVersion
	}
	if p.Type == TypeAnthropic && p.APIVersion == "" {
		p.APIVersion = "2023-06-01"
	}
	return nil
}

// completeDemo checks a demo provider, which Tollgate answers itself, and
// gives it DemoBaseURL.
func completeDemo(f string, p *Provider) error {
	if p.BaseURL != "" {
		return fieldErr(f+".base_url", "is not taken by a demo provider: Tollgate answers it itself")
	}
	if p.APIKey.Reveal() != "" {
		return fieldErr(f+".api_key", "is not taken by a demo provider")
	}
	p.BaseURL = DemoBaseURL
	return nil
}

// validateModels checks and completes every model, and indexes them by
// id; the providers they name must be indexed already.
func (c *Config) validateModels() error {
	c.models = make(map[string]*Model, len(c.Models))
	for i := range c.Models {
		m := &c.Models[i]
		f, err := namedEntry("models", i, "id", m.ID, c.models)
		if err != nil {
			return err
		}
		if err := c.validateModel(f, m); err != nil {
			return err
		}
		c.models[m.ID] = m
	}
	return nil
}

// validateModel checks and completes the model at field f.
func (c *Config) validateModel(f string, m *Model) error {
	if strings.ContainsAny(m.ID, "#\x00\r\n") || len(m.ID) > 256 {
		return fieldErr(f+".id", "must not contain '#' or control characters, nor exceed 256 bytes")
	}
	if m.MaxTokens < 1 {
		return fieldErr(f+".max_tokens", "must be at least 1")
	}
	if m.InputPricePerMillion < 0 {
		return fieldErr(f+".input_price_per_million", "must not be negative")
	}
	if m.OutputPricePerMillion < 0 {
		return fieldErr(f+".output_price_per_million", "must not be negative")
	}
	if m.RequestTimeout == 0 {
		m.RequestTimeout = Duration(DefaultRequestTimeout)
	}
	if m.RequestTimeout < 0 {
		return fieldErr(f+".request_timeout", "must be positive, got %s", m.RequestTimeout.D())
	}
	if len(m.Deployments) == 0 {
		return fieldErr(f+".deployments", "needs at least one deployment")
	}
	if err := c.validateDeployments(f, m); err != nil {
		return err
	}
	return c.modelCosts(f, m)
}

// validateDeployments checks and completes the deployments of the model
// at field f, and gives each its id.
func (c *Config) validateDeployments(f string, m *Model) error {
	seen := make(map[string]int, len(m.Deployments))
	for j := range m.Deployments {
		d := &m.Deployments[j]
		df := fmt.Sprintf("%s.deployments[%d]", f, j)
		if d.Provider == "" {
			return fieldErr(df+".provider", "is required")
		}
		if _, ok := c.providers[d.Provider]; !ok {
			return fieldErr(df+".provider", "names unknown provider %q", d.Provider)
		}
		if d.Model == "" {
			return fieldErr(df+".model", "is required (the provider's name for the model)")
		}
		if d.Priority < 0 {
			return fieldErr(df+".priority", "must not be negative")
		}
		if d.Weight == 0 {
			d.Weight = 1
		}
		if d.Weight < 0 || d.Weight > 128 {
			return fieldErr(df+".weight", "must be between 1 and 128")
		}
		d.ID = DeploymentID(m.ID, d.Provider, d.Model)
		if k, dup := seen[d.ID]; dup {
			return fieldErr(df, "repeats deployments[%d] (provider %q, model %q)", k, d.Provider, d.Model)
		}
		seen[d.ID] = j
	}
	return nil
}

// validatePlans checks every plan and indexes them by name; the models
// they name must be indexed already.
func (c *Config) validatePlans() error {
	c.plans = make(map[string]*Plan, len(c.Plans))
	if len(c.Plans) == 0 {
		return fieldErr("plans", "needs at least one plan")
	}
	for i := range c.Plans {
		p := &c.Plans[i]
		f, err := namedEntry("plans", i, "name", p.Name, c.plans)
		if err != nil {
			return err
		}
		if p.DefaultRPM < 0 {
			return fieldErr(f+".default_rpm", "must not be negative (0 means unlimited)")
		}
		if p.DefaultTPM < 0 {
			return fieldErr(f+".default_tpm", "must not be negative (0 means unlimited)")
		}
		if p.DefaultTokensPerDay < 0 {
			return fieldErr(f+".default_tokens_per_day", "must not be negative (0 means unlimited)")
		}
		if err := validateBudgets(f, p.DefaultKeyBudgets); err != nil {
			return err
		}
		for j, m := range p.Models {
			if m == "*" {
				continue
			}
			if _, ok := c.models[m]; !ok {
				return fieldErr(fmt.Sprintf("%s.models[%d]", f, j), "names unknown model %q", m)
			}
		}
		c.plans[p.Name] = p
	}
	return nil
}

// namedEntry checks the name (or id) of entry i of a list, which must be
// given and not already in seen, and returns the entry's field name for
// messages: "models[2] (gpt-4o)".
func namedEntry[T any](list string, i int, key, name string, seen map[string]*T) (string, error) {
	f := fmt.Sprintf("%s[%d]", list, i)
	if name == "" {
		return f, fieldErr(f+"."+key, "is required")
	}
	f = fmt.Sprintf("%s[%d] (%s)", list, i, name)
	if _, dup := seen[name]; dup {
		return f, fieldErr(f+"."+key, "%q is defined twice", name)
	}
	return f, nil
}

// modelCosts checks and completes what the hold of a model's request
// needs beyond its prices: the most an image costs, its context window,
// and the price-changing parameters it allows.
func (c *Config) modelCosts(f string, m *Model) error {
	if m.ImageTokens < 0 {
		return fieldErr(f+".image_tokens", "must not be negative")
	}
	if m.FileTokens < 0 {
		return fieldErr(f+".file_tokens", "must not be negative (0 refuses file parts)")
	}
	if m.ContextWindow < 0 {
		return fieldErr(f+".context_window", "must be positive, got %d", m.ContextWindow)
	}
	if err := checkAllowed(f+".allow_parameters", m.AllowParameters); err != nil {
		return err
	}
	m.allowed = map[string]bool{}
	for _, p := range m.AllowParameters {
		m.allowed[p] = true
	}
	for _, param := range UnpricedParameters {
		every := true
		for _, d := range m.Deployments {
			every = every && slices.Contains(c.providers[d.Provider].AllowParameters, param)
		}
		if every {
			m.allowed[param] = true
		}
	}
	imageTokens, contextWindow := m.ImageTokens == 0, m.ContextWindow == 0
	for _, d := range m.Deployments {
		typ := c.providers[d.Provider].Type
		if imageTokens {
			m.ImageTokens = max(m.ImageTokens, DefaultImageTokens[typ])
		}
		if contextWindow {
			m.ContextWindow = max(m.ContextWindow, DefaultContextWindow[typ])
		}
	}
	return nil
}

func checkAllowed(field string, names []string) error {
	for i, n := range names {
		if !slices.Contains(UnpricedParameters, n) {
			return fieldErr(fmt.Sprintf("%s[%d]", field, i), "%q is not a price-changing parameter (%s)", n, strings.Join(UnpricedParameters, ", "))
		}
	}
	return nil
}

// validHeaderName reports an HTTP field name (RFC 9110 token characters).
func validHeaderName(h string) bool {
	if h == "" || len(h) > 256 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// FieldError is a validation error about one field of the file.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return "config: " + e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// UnmarshalYAML reads a dollar amount exactly from the scalar's text, so
// 0.15 is 150,000,000 nano-dollars, not a float's neighbour.
func unmarshalNanos(value *yaml.Node) (money.Nanos, error) {
	if value.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("line %d: a price must be a number of dollars", value.Line)
	}
	n, err := money.ParseUSD(value.Value)
	if err != nil {
		return 0, fmt.Errorf("line %d: %w", value.Line, err)
	}
	return n, nil
}

// modelFields is the field index of each of Model's YAML keys, read from
// its tags: the struct is the one list of a model's fields.
var modelFields = yamlFields(reflect.TypeFor[Model]())

func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name != "" && name != "-" {
			out[name] = i
		}
	}
	return out
}

// UnmarshalYAML implements yaml.Unmarshaler for Model so prices (its
// money.Nanos fields) are exact dollar amounts, and so a misspelt field is
// an error (Decode does not apply the decoder's KnownFields here, and a
// misspelt price must not be silently free).
func (m *Model) UnmarshalYAML(value *yaml.Node) error {
	type plain Model // Model's fields without this method
	rest := *value
	type price struct {
		field int
		name  string
		node  *yaml.Node
	}
	var prices []price
	if value.Kind == yaml.MappingNode {
		rest.Content = nil
		for i := 0; i+1 < len(value.Content); i += 2 {
			k := value.Content[i]
			f, ok := modelFields[k.Value]
			switch {
			case !ok:
				return fmt.Errorf("line %d: field %s not found in type config.Model", k.Line, k.Value)
			case reflect.TypeFor[Model]().Field(f).Type == reflect.TypeFor[money.Nanos]():
				prices = append(prices, price{f, k.Value, value.Content[i+1]})
			default:
				rest.Content = append(rest.Content, k, value.Content[i+1])
			}
		}
	}
	var p plain
	if err := rest.Decode(&p); err != nil {
		return err
	}
	*m = Model(p)
	fields := reflect.ValueOf(m).Elem()
	given := map[string]bool{}
	for _, pr := range prices {
		n, err := unmarshalNanos(pr.node)
		if err != nil {
			return fmt.Errorf("model %q: %s: %w", m.ID, pr.name, err)
		}
		fields.Field(pr.field).Set(reflect.ValueOf(n))
		given[pr.name] = true
	}
	// An absent price is free, but the cache prices default to the input
	// price.
	if !given["cached_input_price_per_million"] {
		m.CachedInputPricePerMillion = m.InputPricePerMillion
	}
	if !given["cache_write_price_per_million"] {
		m.CacheWritePricePerMillion = m.InputPricePerMillion
	}
	return nil
}

// Tokens are what a request is billed for: its prompt (of which some were
// read from the provider's prompt cache, and some written to it) and its
// completion.
type Tokens struct {
	Prompt, CachedPrompt, CacheWrite, Completion int64
}

// Cost is what the model charges for t: the prompt tokens read from the
// cache at the cached input price, those written to it at the cache-write
// price, the rest of the prompt at the input price, and the completion at
// the output price — each rounded up separately.
func (m *Model) Cost(t Tokens) money.Nanos {
	cached := min(max(t.CachedPrompt, 0), t.Prompt)
	written := min(max(t.CacheWrite, 0), t.Prompt-cached)
	return money.Add(money.Add(money.Cost(t.Prompt-cached-written, m.InputPricePerMillion), money.Cost(cached, m.CachedInputPricePerMillion)),
		money.Add(money.Cost(written, m.CacheWritePricePerMillion), money.Cost(t.Completion, m.OutputPricePerMillion)))
}

// MostPromptPrice is the highest price a prompt token can cost (the hold
// of a request prices its prompt at it).
func (m *Model) MostPromptPrice() money.Nanos {
	return max(m.InputPricePerMillion, m.CachedInputPricePerMillion, m.CacheWritePricePerMillion)
}
