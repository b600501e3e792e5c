package config

import (
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tollgate/tollgate/apikey"
)

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

// validate checks a decoded configuration, fills the defaults where the
// file is silent, and indexes the providers, models and plans for the
// lookups. The first error found is returned, naming its field.
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
	if err := c.SSO.validate(); err != nil {
		return err
	}
	if err := c.validateSMTP(); err != nil {
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
	if err := completeProfile(f, p); err != nil {
		return err
	}
	switch p.Type {
	case TypeOpenAI, TypeAzure, TypeAnthropic, TypeGemini:
	case TypeDemo:
		if err := completeDemo(f, p); err != nil {
			return err
		}
	case TypeVertex:
		if err := completeVertex(f, p); err != nil {
			return err
		}
	case TypeBedrock:
		if err := completeBedrock(f, p); err != nil {
			return err
		}
	case "":
		return fieldErr(f+".type", "is required (openai, azure, anthropic, gemini, demo, vertex or bedrock)")
	default:
		return fieldErr(f+".type", "must be openai, azure, anthropic, gemini, demo, vertex, bedrock or a profile (%s), got %q", profileNames(), p.Type)
	}
	if p.Type != TypeVertex && (p.Project != "" || p.Location != "" || p.CredentialsFile != "") {
		return fieldErr(f+".project", "project, location and credentials_file are for vertex providers only")
	}
	if p.Type != TypeVertex && p.Type != TypeBedrock && p.Region != "" {
		return fieldErr(f+".region", "is for vertex and bedrock providers only")
	}
	if p.BaseURL == "" {
		return fieldErr(f+".base_url", "is required")
	}
	if p.StreamUsage != nil && p.Type != TypeOpenAI && p.Type != TypeDemo {
		return fieldErr(f+".stream_usage", "is for openai-type providers only")
	}
	if p.Type != TypeBedrock && (p.AccessKeyID != "" || p.SecretAccessKey != "") {
		return fieldErr(f+".access_key_id", "access_key_id and secret_access_key are for bedrock providers only")
	}
	if p.ResponsesAPI && p.Type != TypeOpenAI {
		return fieldErr(f+".responses_api", "is for openai-type providers only; %s providers are served by translation", p.Type)
	}
	switch {
	case p.RerankAPI == "":
		p.RerankAPI = RerankCohere
	case p.RerankAPI != RerankCohere && p.RerankAPI != RerankVoyage:
		return fieldErr(f+".rerank_api", "must be %s or %s, got %q", RerankCohere, RerankVoyage, p.RerankAPI)
	case p.Type != TypeOpenAI:
		return fieldErr(f+".rerank_api", "is for openai-type providers only")
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

// completeVertex checks a vertex provider: its project and region
// (location is the same field), a credential that is Google's, never an
// api_key, and base_url, derived from the region unless given.
func completeVertex(f string, p *Provider) error {
	if p.Project == "" {
		return fieldErr(f+".project", "is required for a vertex provider (the Google Cloud project id)")
	}
	switch {
	case p.Region == "":
		p.Region = p.Location
	case p.Location != "" && p.Location != p.Region:
		return fieldErr(f+".location", "is region under another name; %q differs from region %q", p.Location, p.Region)
	}
	if p.Region == "" {
		return fieldErr(f+".region", "is required for a vertex provider (us-central1, europe-west4, …, or global)")
	}
	if !validRegion(p.Region) {
		return fieldErr(f+".region", "must be a Google Cloud location such as us-central1 or global, got %q", p.Region)
	}
	p.Location = p.Region
	if p.APIKey.Reveal() != "" {
		return fieldErr(f+".api_key", "is not taken by a vertex provider: it authenticates with Google's credentials (credentials_file, or Application Default Credentials)")
	}
	if p.BaseURL == "" {
		p.BaseURL = VertexBaseURL(p.Region)
	}
	return nil
}

// VertexBaseURL is Vertex AI's endpoint for a region: the global one for
// "global", the region's own otherwise.
func VertexBaseURL(region string) string {
	if region == "global" {
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + region + "-aiplatform.googleapis.com"
}

// validRegion reports a location name (Google's) or region name
// (AWS's): lowercase letters, digits and dashes.
func validRegion(r string) bool {
	if len(r) > 64 {
		return false
	}
	for _, c := range r {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
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

// completeBedrock checks a bedrock provider's region and credentials,
// and gives it the region's base URL when it names none.
func completeBedrock(f string, p *Provider) error {
	if p.Region == "" || !validRegion(p.Region) {
		return fieldErr(f+".region", "is required for bedrock: an AWS region such as us-east-1, got %q", p.Region)
	}
	if (p.AccessKeyID == "") != (p.SecretAccessKey == "") {
		return fieldErr(f+".secret_access_key", "access_key_id and secret_access_key go together")
	}
	if p.APIKey != "" && p.AccessKeyID != "" {
		return fieldErr(f+".api_key", "a Bedrock API key replaces access_key_id and secret_access_key: set one or the other")
	}
	if p.BaseURL == "" {
		p.BaseURL = "https://bedrock-runtime." + p.Region + ".amazonaws.com"
	}
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
	return c.indexAliases()
}

// indexAliases checks the models' aliases and indexes them: no alias is a
// model's id or another alias, and "*" only ends one.
func (c *Config) indexAliases() error {
	c.aliases = map[string]*Model{}
	c.aliasPrefixes = nil
	seen := map[string]string{}
	for i := range c.Models {
		m := &c.Models[i]
		for j, a := range m.Aliases {
			f := fmt.Sprintf("models[%d] (%s).aliases[%d]", i, m.ID, j)
			name, prefix := strings.CutSuffix(a, "*")
			switch {
			case name == "":
				return fieldErr(f, "must name something before any '*'")
			case strings.ContainsAny(name, "*#\x00\r\n") || len(a) > 256:
				return fieldErr(f, "%q: '*' may only end an alias; no '#' or control characters, at most 256 bytes", a)
			}
			if _, ok := c.models[name]; ok && !prefix {
				return fieldErr(f, "%q is already a model's id", a)
			}
			if other, dup := seen[a]; dup {
				return fieldErr(f, "%q is already an alias of %s", a, other)
			}
			seen[a] = m.ID
			if prefix {
				c.aliasPrefixes = append(c.aliasPrefixes, aliasPrefix{prefix: name, model: m})
			} else {
				c.aliases[name] = m
			}
		}
	}
	sort.SliceStable(c.aliasPrefixes, func(i, j int) bool {
		return len(c.aliasPrefixes[i].prefix) > len(c.aliasPrefixes[j].prefix)
	})
	return nil
}

// validateModel checks and completes the model at field f.
func (c *Config) validateModel(f string, m *Model) error {
	if strings.ContainsAny(m.ID, "#\x00\r\n") || len(m.ID) > 256 {
		return fieldErr(f+".id", "must not contain '#' or control characters, nor exceed 256 bytes")
	}
	if m.Kind == "" {
		m.Kind = KindChat
	}
	if _, ok := KindProviders[m.Kind]; !ok {
		return fieldErr(f+".kind", "%q is not a kind of model (%s, %s, %s, %s or %s)", m.Kind,
			KindChat, KindCompletion, KindEmbedding, KindModeration, KindRerank)
	}
	if m.MaxTokens < 1 && m.Generates() {
		return fieldErr(f+".max_tokens", "must be at least 1")
	}
	if !m.Generates() && (m.MaxTokens != 0 || m.OutputPricePerMillion != 0) {
		return fieldErr(f, "a %s model writes no tokens: it takes no max_tokens nor output_price_per_million", m.Kind)
	}
	if m.SearchUnitPrice < 0 || (m.SearchUnitPrice != 0 && m.Kind != KindRerank) {
		return fieldErr(f+".search_unit_price", "prices rerank models only, and must not be negative")
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
		if typ := c.providers[d.Provider].Type; !slices.Contains(KindProviders[m.Kind], typ) {
			return fieldErr(df+".provider", "%q (type %s) serves no %s models (types %s do)", d.Provider, typ, m.Kind,
				strings.Join(KindProviders[m.Kind], ", "))
		}
		if typ := c.providers[d.Provider].Type; typ == TypeVertex && m.Kind != KindChat && strings.HasPrefix(d.Model, "claude-") {
			return fieldErr(df+".model", "%q is Claude, which serves chat models only on Vertex", d.Model)
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

// checkAllowed refuses a name at field that is not one of
// UnpricedParameters.
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

// fieldErr is a *FieldError about field.
func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
