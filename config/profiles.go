package config

import "strings"

// Profiles name OpenAI-compatible servers. A provider written with a
// profile's name as its type ("type: mistral") is an openai-type provider
// (Type is TypeOpenAI, so that every openai-type feature serves it) with
// Profile set: the profile gives its default base_url, the output-limit
// field its server honours, whether it takes stream_options, the
// parameters it refuses, and whether it refuses a message's name. docs/providers.md's table of profiles is this
// table.

// Profile is one OpenAI-compatible server's documented behaviour.
type Profile struct {
	Name string
	// BaseURL is the server's documented endpoint: the provider's base_url
	// when the file gives none.
	BaseURL string
	// LimitField is the one output-limit field the server honours
	// (max_tokens or max_completion_tokens); "" is OpenAI's rule:
	// max_completion_tokens for a reasoning model, max_tokens for the rest.
	LimitField string
	// StreamOptions: the server takes stream_options.include_usage, so
	// Tollgate asks it for a stream's usage (Provider.StreamUsage's
	// default). A server without it is sent no stream_options at all.
	StreamOptions bool
	// StripStreamOptions: the server refuses stream_options but ends every
	// stream with its usage anyway, so a client's stream_options is
	// removed, and its include_usage is honoured by that last chunk.
	StripStreamOptions bool
	// Usage says where a stream's counts come from when Tollgate does not
	// ask for them (for docs/providers.md).
	Usage string
	// Refuses are the chat parameters the server answers with an error;
	// Tollgate refuses them first, with 400 unsupported_parameter (a
	// parameter's neutral value, as n: 1, passes).
	Refuses []string
	// Renames are chat parameters the server takes under another name
	// (OpenAI's name → the server's): the value passes as it is.
	Renames map[string]string
	// DropsMessageName: the server refuses a message's name field (the
	// speaker's name, which OpenAI takes as a hint); it is dropped, as for
	// the providers whose messages have no such field.
	DropsMessageName bool
	// ReasoningContent: the server takes an assistant message's
	// reasoning_content back (DeepSeek's reasoning models need it on
	// tool-call turns), so the Responses and Messages translations send
	// it the reasoning of earlier turns.
	ReasoningContent bool
	// Quirks is the rest worth knowing, for docs/providers.md.
	Quirks string
}

const (
	usageLastChunk = "its last chunk's usage, else estimated"
	usageEstimated = "estimated (its usage read when it sends one)"
)

// Profiles are the named OpenAI-compatible servers, in docs order.
var Profiles = []Profile{
	{Name: "mistral", BaseURL: "https://api.mistral.ai/v1", LimitField: "max_tokens", Usage: usageLastChunk,
		StripStreamOptions: true, Renames: map[string]string{"seed": "random_seed"},
		Refuses: []string{"logit_bias", "logprobs", "top_logprobs", "user"},
		Quirks:  "refuses unknown fields (422 `extra_forbidden`); its 422 `{\"detail\":[…]}` becomes 400 `invalid_request_error` with its message"},
	{Name: "groq", BaseURL: "https://api.groq.com/openai/v1", LimitField: "max_completion_tokens",
		Usage:   "its last chunk's x_groq.usage, else estimated",
		Refuses: []string{"logprobs", "logit_bias", "top_logprobs", "n"}, DropsMessageName: true},
	{Name: "deepseek", BaseURL: "https://api.deepseek.com", LimitField: "max_tokens", StreamOptions: true, ReasoningContent: true,
		Quirks: "`reasoning_content` on assistant messages passes, as its reasoning models need on tool-call turns; through the Responses API it is a `reasoning` item, through the Messages API a `thinking` block, each sent back as `reasoning_content`"},
	{Name: "xai", BaseURL: "https://api.x.ai/v1", StreamOptions: true},
	{Name: "together", BaseURL: "https://api.together.xyz/v1", LimitField: "max_tokens", Usage: usageLastChunk},
	{Name: "fireworks", BaseURL: "https://api.fireworks.ai/inference/v1", LimitField: "max_tokens", Usage: usageLastChunk},
	{Name: "openrouter", BaseURL: "https://openrouter.ai/api/v1", LimitField: "max_tokens", Usage: usageLastChunk},
	{Name: "perplexity", BaseURL: "https://api.perplexity.ai", LimitField: "max_tokens", Usage: usageLastChunk},
	{Name: "cerebras", BaseURL: "https://api.cerebras.ai/v1", LimitField: "max_completion_tokens", Usage: usageLastChunk,
		Refuses: []string{"frequency_penalty", "presence_penalty", "logit_bias", "parallel_tool_calls", "service_tier"}},
	{Name: "ollama", BaseURL: "http://localhost:11434/v1", LimitField: "max_tokens", StreamOptions: true},
	{Name: "vllm", BaseURL: "http://localhost:8000/v1", StreamOptions: true},
	{Name: "lmstudio", BaseURL: "http://localhost:1234/v1", LimitField: "max_tokens", Usage: usageEstimated},
}

// ProfileNamed is the profile called name.
func ProfileNamed(name string) (*Profile, bool) {
	for i := range Profiles {
		if Profiles[i].Name == name {
			return &Profiles[i], true
		}
	}
	return nil, false
}

// ProfileOf is the provider's profile, or nil for a plain provider.
func (p *Provider) ProfileOf() *Profile {
	if p.Profile == "" {
		return nil
	}
	prof, _ := ProfileNamed(p.Profile)
	return prof
}

// SendsStreamUsage reports whether Tollgate asks this openai-type provider
// for a stream's usage (stream_options.include_usage).
func (p *Provider) SendsStreamUsage() bool { return p.StreamUsage == nil || *p.StreamUsage }

// completeProfile turns a profile's name written as the type into an
// openai-type provider with that profile, and fills what the profile
// defaults. A provider of type openai may name its profile itself.
func completeProfile(f string, p *Provider) error {
	if prof, ok := ProfileNamed(p.Type); ok {
		if p.Profile != "" && p.Profile != prof.Name {
			return fieldErr(f+".profile", "is %q, but the type is profile %q", p.Profile, prof.Name)
		}
		p.Type, p.Profile = TypeOpenAI, prof.Name
	}
	if p.Profile == "" {
		return nil
	}
	prof, ok := ProfileNamed(p.Profile)
	if !ok {
		return fieldErr(f+".profile", "must be one of %s, got %q", profileNames(), p.Profile)
	}
	if p.Type != TypeOpenAI {
		return fieldErr(f+".profile", "is for openai-type providers only")
	}
	if p.BaseURL == "" {
		p.BaseURL = prof.BaseURL
	}
	if p.StreamUsage == nil {
		v := prof.StreamOptions
		p.StreamUsage = &v
	}
	return nil
}

// profileNames lists the profiles' names, for errors.
func profileNames() string {
	names := make([]string, len(Profiles))
	for i, p := range Profiles {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
