package provider

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

// This file is the one table of what each provider type does with each
// request parameter of OpenAI's chat completions. No parameter is ever
// ignored: it passes as it is, is translated, or the request is refused
// with 400 unsupported_parameter naming it. The parameter table of docs/providers.md is
// generated from it (ParameterTable), and a test keeps the two equal.

// Support is what a provider type does with a parameter.
type Support struct {
	// Refused: a request that sets the parameter (to anything but its
	// neutral value) is refused.
	Refused bool
	// How is the short description in docs/providers.md's table: "passes",
	// "as stop_sequences"…
	How string
}

var (
	passes  = Support{How: "passes"}
	refused = Support{Refused: true, How: "refused"}
)

func as(how string) Support { return Support{How: how} }

// refusedUnless is refused, but for the parameter's neutral value.
func refusedUnless(neutral string) Support {
	return Support{Refused: true, How: "refused (" + neutral + " passes)"}
}

// Parameter is one request parameter and its support per provider type.
type Parameter struct {
	Name string
	// Neutral reports that a value means the parameter is not really set
	// (n: 1, logprobs: false…); nil means only null is neutral.
	Neutral func(v gjson.Result) bool
	By      map[string]Support
	// Unpriced names the allowance (one of config.UnpricedParameters) a
	// model needs for a request that sets the parameter: its price is not
	// the model's per-token price, so the router step refuses it unless
	// the model allows it.
	Unpriced string
}

// ProviderTypes are the columns of the table, in order.
var ProviderTypes = []string{config.TypeOpenAI, config.TypeAzure, config.TypeAnthropic, config.TypeGemini}

func all(s Support) map[string]Support {
	return map[string]Support{config.TypeOpenAI: s, config.TypeAzure: s, config.TypeAnthropic: s, config.TypeGemini: s}
}

func openAIOnly(anthropic, gemini Support) map[string]Support {
	return map[string]Support{config.TypeOpenAI: passes, config.TypeAzure: passes, config.TypeAnthropic: anthropic, config.TypeGemini: gemini}
}

func isFalse(v gjson.Result) bool { return v.Type == gjson.False }

// Parameters is the table, in the order of OpenAI's reference.
var Parameters = []Parameter{
	{Name: "model", By: map[string]Support{config.TypeOpenAI: as("the deployment's model"), config.TypeAzure: as("the deployment, in the path"),
		config.TypeAnthropic: as("the deployment's model"), config.TypeGemini: as("the deployment's model, in the path")}},
	{Name: "messages", By: openAIOnly(as("system and developer → system; the rest as messages"), as("contents; system and developer → systemInstruction"))},
	{Name: "stream", By: openAIOnly(as("stream"), as(":streamGenerateContent"))},
	{Name: "stream_options", By: all(as("include_usage honoured; Tollgate meters every stream"))},
	{Name: "temperature", By: openAIOnly(as("capped at 1"), passes)},
	{Name: "top_p", By: openAIOnly(as("passes, unless temperature is set"), as("topP"))},
	{Name: "max_tokens", By: outputLimit},
	{Name: "max_completion_tokens", By: outputLimit},
	{Name: "stop", By: openAIOnly(as("stop_sequences"), as("stopSequences"))},
	{Name: "n", Neutral: func(v gjson.Result) bool { return v.Int() == 1 }, By: openAIOnly(refusedUnless("1"), as("candidateCount"))},
	{Name: "presence_penalty", By: openAIOnly(refused, as("presencePenalty"))},
	{Name: "frequency_penalty", By: openAIOnly(refused, as("frequencyPenalty"))},
	{Name: "seed", By: openAIOnly(refused, as("seed"))},
	{Name: "logit_bias", By: openAIOnly(refused, refused)},
	{Name: "logprobs", Neutral: isFalse, By: openAIOnly(refusedUnless("false"), as("responseLogprobs; logprobsResult → logprobs.content"))},
	{Name: "top_logprobs", Neutral: func(v gjson.Result) bool { return v.Int() == 0 }, By: openAIOnly(refusedUnless("0"), as("logprobs (with logprobs: true)"))},
	{Name: "user", By: openAIOnly(as("metadata.user_id"), refused)},
	{Name: "tools", By: openAIOnly(as("tools (function tools)"), as("functionDeclarations"))},
	{Name: "tool_choice", By: openAIOnly(as("tool_choice"), as("functionCallingConfig"))},
	{Name: "parallel_tool_calls", By: openAIOnly(as("false → disable_parallel_tool_use"),
		refusedUnless("true")),
		Neutral: func(v gjson.Result) bool { return v.Type == gjson.True }},
	{Name: "response_format", By: openAIOnly(as("a forced tool; its input is the content"), as("responseMimeType, responseJsonSchema"))},
	// Price-changing parameters: refused unless the model allows them
	// (config.UnpricedParameters explains each).
	{Name: "service_tier", Unpriced: "service_tier", Neutral: func(v gjson.Result) bool { return v.Str == "auto" || v.Str == "default" },
		By: unpriced(refusedUnless("auto, default"))},
	{Name: "modalities", Unpriced: "audio", Neutral: textOnly, By: unpriced(refusedUnless(`["text"]`))},
	{Name: "audio", Unpriced: "audio", By: unpriced(refused)},
	{Name: "store", Unpriced: "store", Neutral: isFalse, By: unpriced(refusedUnless("false"))},
	{Name: "prediction", Unpriced: "prediction", By: unpriced(refused)},
	{Name: "web_search_options", Unpriced: "web_search_options", By: unpriced(refused)},
	{Name: "moderation", Unpriced: "moderation", By: unpriced(refused)},
}

// outputLimit is the support of max_tokens and max_completion_tokens: every
// provider gets the held limit (the smaller of the two, else the model's
// max_tokens) in its own field, and no other (limits.go).
var outputLimit = func() map[string]Support {
	openAI := as("the held limit, as max_tokens (max_completion_tokens for a reasoning model)")
	return map[string]Support{config.TypeOpenAI: openAI, config.TypeAzure: openAI,
		config.TypeAnthropic: as("the held limit, as max_tokens"), config.TypeGemini: as("the held limit, as maxOutputTokens")}
}()

// unpriced is the support of a price-changing parameter: OpenAI-type
// providers take it when the model allows it; the translating ones have no
// counterpart.
func unpriced(translating Support) map[string]Support {
	allowed := as("refused unless allowed (allow_parameters)")
	return map[string]Support{config.TypeOpenAI: allowed, config.TypeAzure: allowed, config.TypeAnthropic: translating, config.TypeGemini: translating}
}

// textOnly is modalities asking for text alone.
func textOnly(v gjson.Result) bool {
	only := v.IsArray()
	v.ForEach(func(_, m gjson.Result) bool {
		only = m.Str == "text"
		return only
	})
	return only
}

// UnpricedAllowance is the allowance a request needs for setting the
// top-level parameter name to v (config.Model.Allows), or "" when it
// needs none: the parameter is priced, or v is its neutral value.
func UnpricedAllowance(name string, v gjson.Result) string {
	p, known := parameterIndex[name]
	if !known || p.Unpriced == "" || v.Type == gjson.Null || (p.Neutral != nil && p.Neutral(v)) {
		return ""
	}
	return p.Unpriced
}

// ErrUnsupportedParameter is wrapped by the error of a request that sets a
// parameter its provider refuses.
var ErrUnsupportedParameter = errors.New("unsupported parameter")

// UnsupportedParameterError names the parameter.
type UnsupportedParameterError struct {
	Param, ProviderType string
}

func (e *UnsupportedParameterError) Error() string {
	return fmt.Sprintf("The parameter %q is not supported by this model's provider (%s); remove it or choose another model.", e.Param, e.ProviderType)
}

// Unwrap makes the error both an unsupported request and an unsupported
// parameter.
func (e *UnsupportedParameterError) Unwrap() []error {
	return []error{ErrUnsupportedRequest, ErrUnsupportedParameter}
}

var parameterIndex = func() map[string]*Parameter {
	m := make(map[string]*Parameter, len(Parameters))
	for i := range Parameters {
		m[Parameters[i].Name] = &Parameters[i]
	}
	return m
}()

// checkParameters refuses a body that sets a parameter the provider type
// refuses, or one the table does not know (for a translating provider,
// whose request Tollgate writes: an unknown parameter could only be
// dropped). OpenAI-type and Azure deployments take every parameter as it is.
// It walks the body's top-level keys, which the decoded chat request
// cannot show (it keeps only the fields the adapters read).
func checkParameters(providerType string, body []byte) error {
	var err error
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		if v.Type == gjson.Null {
			return true
		}
		p, known := parameterIndex[k.String()]
		switch {
		case !known && (providerType == config.TypeAnthropic || providerType == config.TypeGemini || providerType == config.TypeBedrock):
		case !known:
			return true
		case !p.By[providerType].Refused:
			return true
		case p.Neutral != nil && p.Neutral(v):
			return true
		}
		err = &UnsupportedParameterError{Param: k.String(), ProviderType: providerType}
		return false
	})
	return err
}

// ParameterTable is docs/providers.md's table of parameters × provider types.
func ParameterTable() string {
	var b strings.Builder
	b.WriteString("| parameter |")
	for _, t := range ProviderTypes {
		b.WriteString(" `" + t + "` |")
	}
	b.WriteString("\n|---|")
	for range ProviderTypes {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, p := range Parameters {
		b.WriteString("| `" + p.Name + "` |")
		for _, t := range ProviderTypes {
			b.WriteString(" " + p.By[t].How + " |")
		}
		b.WriteString("\n")
	}
	b.WriteString("| any other |")
	for _, t := range ProviderTypes {
		if checkParameters(t, []byte(`{"a_parameter_nobody_knows":1}`)) != nil {
			b.WriteString(" refused |")
		} else {
			b.WriteString(" passes |")
		}
	}
	b.WriteString("\n")
	return b.String()
}

// bedrockParameters is the bedrock column of the table, added to
// Parameters (and ProviderTypes) by init.
var bedrockParameters = map[string]Support{
	"model":                 as("the deployment's model, in the path"),
	"messages":              as("system and developer → system; the rest as messages"),
	"stream":                as("/converse-stream"),
	"stream_options":        as("include_usage honoured; Tollgate meters every stream"),
	"temperature":           as("inferenceConfig.temperature, capped at 1"),
	"top_p":                 as("inferenceConfig.topP"),
	"max_tokens":            as("the held limit, as inferenceConfig.maxTokens"),
	"max_completion_tokens": as("the held limit, as inferenceConfig.maxTokens"),
	"stop":                  as("inferenceConfig.stopSequences"),
	"n":                     refusedUnless("1"),
	"presence_penalty":      refused,
	"frequency_penalty":     refused,
	"seed":                  refused,
	"logit_bias":            refused,
	"logprobs":              refusedUnless("false"),
	"top_logprobs":          refusedUnless("0"),
	"user":                  refused,
	"tools":                 as("toolConfig.tools (toolSpec)"),
	"tool_choice":           as("toolConfig.toolChoice"),
	"parallel_tool_calls":   refusedUnless("true"),
	"response_format":       as("a forced tool; its input is the content"),
	"service_tier":          refusedUnless("auto, default"),
	"modalities":            refusedUnless(`["text"]`),
	"audio":                 refused,
	"store":                 refusedUnless("false"),
	"prediction":            refused,
	"web_search_options":    refused,
	"moderation":            refused,
}

func init() {
	ProviderTypes = append(ProviderTypes, config.TypeBedrock)
	for i := range Parameters {
		Parameters[i].By[config.TypeBedrock] = bedrockParameters[Parameters[i].Name]
	}
}
