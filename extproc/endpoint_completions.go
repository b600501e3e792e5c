package extproc

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// completionsEndpoint is POST /v1/completions (OpenAI's legacy
// completions), streamed or not, to the OpenAI-type servers that serve it
// (vLLM, Ollama, gpt-3.5-turbo-instruct) and Azure. Its output limit is
// held and sent as max_tokens, as a chat completion's is.
var completionsEndpoint = func() *endpoint {
	ep := passEndpoint(provider.Completions, contract.PathCompletions, checkCompletions)
	ep.limitField = "max_tokens"
	return ep
}()

// DefaultCompletionTokens is OpenAI's max_tokens for a completion request
// that gives none.
const DefaultCompletionTokens = 16

// MaxCompletionPrompts is the most prompts one completion request may
// have.
const MaxCompletionPrompts = 2048

// checkCompletions validates a legacy completion request with the chat
// rules that apply to it: max_tokens from 1 to the model's maximum
// (default 16), n from 1 to 128 and best_of from n to 20 (each prompt is
// answered max(n, best_of) times, every one billed), temperature 0–2,
// top_p 0–1, penalties −2–2, at most 4 stop sequences, stream a boolean
// and stream_options only with it.
func checkCompletions(body []byte, cfg *config.Config) (validChat, *oaierror.Error) {
	root, cr, e := endpointRequest(body, cfg, config.KindCompletion, false)
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	prompts, bound, e := inputs(root.Get("prompt"), "prompt", MaxCompletionPrompts, false)
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	if e := optional(root, map[string]func(gjson.Result) bool{
		"temperature":       numIn(0, 2),
		"top_p":             numIn(0, 1),
		"frequency_penalty": numIn(-2, 2),
		"presence_penalty":  numIn(-2, 2),
		"n":                 intIn(1, MaxChoices),
		"best_of":           intIn(1, 20),
		"logprobs":          intIn(0, 5),
		"stream":            isBool,
		"echo":              isBool,
		"suffix":            isString,
		"user":              isString,
		"seed":              isInt,
		"logit_bias":        func(v gjson.Result) bool { return v.IsObject() },
		"stream_options":    func(v gjson.Result) bool { return v.IsObject() },
	}, map[string]string{
		"temperature": "a number from 0 to 2", "top_p": "a number from 0 to 1",
		"frequency_penalty": "a number from -2 to 2", "presence_penalty": "a number from -2 to 2",
		"n": "an integer from 1 to 128", "best_of": "an integer from 1 to 20", "logprobs": "an integer from 0 to 5",
		"stream": "a boolean", "echo": "a boolean", "suffix": "a string", "user": "a string", "seed": "an integer",
		"logit_bias": "an object", "stream_options": "an object",
	}); e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	cr.Stream = root.Get("stream").Type == gjson.True
	if so := root.Get("stream_options"); so.Exists() && so.Type != gjson.Null {
		if !cr.Stream {
			return validChat{Asked: cr.Asked}, invalid("invalid_request", "stream_options", "stream_options is only allowed when stream is true.")
		}
		cr.ClientUsage = so.Get("include_usage").Type == gjson.True
	}
	stop := root.Get("stop")
	switch {
	case !stop.Exists() || stop.Type == gjson.Null || stop.Type == gjson.String:
	case stop.IsArray() && stop.Get("#").Int() <= 4:
		for _, s := range stop.Array() {
			if s.Type != gjson.String {
				return validChat{Asked: cr.Asked}, invalid("invalid_stop", "stop", "stop must be a string or an array of up to 4 strings.")
			}
		}
	default:
		return validChat{Asked: cr.Asked}, invalid("invalid_stop", "stop", "stop must be a string or an array of up to 4 strings.")
	}
	n, bestOf := max(root.Get("n").Int(), 1), root.Get("best_of").Int()
	if bestOf != 0 && bestOf < n {
		return validChat{Asked: cr.Asked}, invalid("invalid_request", "best_of", "best_of must be at least n.")
	}
	cr.MaxTokens = DefaultCompletionTokens
	if mt := root.Get("max_tokens"); mt.Exists() && mt.Type != gjson.Null {
		if !isInt(mt) || mt.Int() < 1 || mt.Int() > int64(cr.Model.MaxTokens) {
			return validChat{Asked: cr.Asked}, invalid("invalid_max_tokens", "max_tokens",
				"max_tokens must be an integer from 1 to %d for this model.", cr.Model.MaxTokens)
		}
		cr.MaxTokens = mt.Int()
	}
	cr.MaxTokens = min(cr.MaxTokens, int64(cr.Model.MaxTokens))
	cr.Choices = prompts * max(n, bestOf)
	cr.PromptBound = bound
	cr.LimitSent = false // the router step writes the held max_tokens
	return cr, nil
}
