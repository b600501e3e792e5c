package extproc

import (
	"context"
	"strconv"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// The endpoints that are not chat (embeddings, legacy completions,
// moderations, rerank) are each one row and one file: a check of the
// client's body as the endpoint's own request, which names the model and
// the most the request can cost (validChat: the prompt's bound, the
// output limit and choices of a completion, a rerank's search units),
// and an attempt that sends the body on in the endpoint's wire format
// (provider.EndpointUpstream) and meters its answer. Admission, holds,
// token limits, records and errors are the chat endpoint's.

// kindPaths is the path of each kind of model, for the refusal of a model
// sent to another kind's path.
var kindPaths = map[string]string{
	config.KindChat:       "/v1/chat/completions (or /v1/responses, /v1/messages)",
	config.KindCompletion: "/v1/completions",
	config.KindEmbedding:  "/v1/embeddings",
	config.KindModeration: "/v1/moderations",
	config.KindRerank:     "/v1/rerank",
}

// wrongKind refuses model m on a path of another kind's, naming its path.
func wrongKind(m *config.Model) *oaierror.Error {
	article := "a"
	if m.Kind == config.KindEmbedding {
		article = "an"
	}
	return invalid("invalid_model", "model", "The model %q is %s %s model: send it to %s.", truncate(m.ID), article, m.Kind, kindPaths[m.Kind])
}

// endpointRequest reads the top level of an endpoint request: a JSON
// object, not nested too deep, without a key given twice, whose model is
// one of kind's (when the body names none, the configuration's first
// model of that kind when dflt, else a refusal).
func endpointRequest(body []byte, cfg *config.Config, kind string, dflt bool) (gjson.Result, validChat, *oaierror.Error) {
	if tooDeep(body, MaxJSONDepth) {
		return gjson.Result{}, validChat{}, invalid("invalid_request", "", "The request body nests JSON deeper than %d levels.", MaxJSONDepth)
	}
	if !gjson.ValidBytes(body) {
		return gjson.Result{}, validChat{}, invalid("invalid_request", "", "The request body is not valid JSON.")
	}
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	if !root.IsObject() {
		return gjson.Result{}, validChat{}, invalid("invalid_request", "", "The request body must be a JSON object.")
	}
	seen := map[string]bool{}
	var dup string
	root.ForEach(func(k, _ gjson.Result) bool {
		if seen[k.Str] {
			dup = k.Str
			return false
		}
		seen[k.Str] = true
		return true
	})
	if dup != "" {
		return gjson.Result{}, validChat{}, invalid("invalid_request", truncate(dup), "The request body gives %q more than once.", truncate(dup))
	}
	var cr validChat
	model := root.Get("model")
	switch {
	case !model.Exists() && dflt:
		for i := range cfg.Models {
			if cfg.Models[i].Kind == kind {
				cr.Model = &cfg.Models[i]
				break
			}
		}
		if cr.Model == nil {
			return root, cr, invalid("invalid_model", "model", "No %s model is configured here: name one with the model parameter.", kind)
		}
	case model.Type != gjson.String || model.Str == "":
		return root, cr, invalid("invalid_model", "model", "You must provide a model parameter (a string).")
	default:
		cr.Asked = string([]byte(model.Str)) // a copy: the body's bytes are the parse's
		m, ok := cfg.Model(model.Str)
		if !ok {
			return root, cr, invalid("invalid_model", "model", "The model %q does not exist.", truncate(model.Str))
		}
		if m.Kind != kind {
			return root, cr, wrongKind(m)
		}
		cr.Model = m
	}
	if cr.Asked == "" {
		cr.Asked = cr.Model.ID
	}
	cr.Choices, cr.LimitSent = 1, true
	return root, cr, nil
}

// inputAllowance is the tokens each input item may cost beyond its text's
// bytes: the markers a provider's tokenizer adds around it (a BERT-style
// embedder adds two, a chat template a few).
const inputAllowance = 8

// inputs checks an input that may be a string, an array of strings, a
// token array (of integers) or an array of token arrays, as OpenAI's
// embeddings and completions take it, with at most most items; it
// returns the items and the most tokens they can cost (a byte of text or
// a token a token, and inputAllowance an item). Empty strings and arrays
// are refused when nonEmpty.
func inputs(v gjson.Result, param string, most int, nonEmpty bool) (items int64, bound int64, e *oaierror.Error) {
	bad := func() *oaierror.Error {
		return invalid("invalid_request", param, "%s must be a string, an array of strings, an array of integers (tokens) or an array of arrays of integers.", param)
	}
	tokens := func(a gjson.Result) (int64, bool) {
		n, ok := int64(0), true
		a.ForEach(func(_, t gjson.Result) bool {
			if t.Type != gjson.Number || t.Num != float64(int64(t.Num)) || t.Num < 0 {
				ok = false
				return false
			}
			n++
			return true
		})
		return n, ok
	}
	switch {
	case !v.Exists() || v.Type == gjson.Null:
		return 0, 0, invalid("invalid_request", param, "You must provide %s.", param)
	case v.Type == gjson.String:
		if nonEmpty && v.Str == "" {
			return 0, 0, invalid("invalid_request", param, "%s must not be empty.", param)
		}
		return 1, int64(len(v.Str)) + inputAllowance, nil
	case !v.IsArray():
		return 0, 0, bad()
	}
	first := v.Get("0")
	if !first.Exists() {
		return 0, 0, invalid("invalid_request", param, "%s must not be an empty array.", param)
	}
	if first.Type == gjson.Number { // one token array
		n, ok := tokens(v)
		if !ok {
			return 0, 0, bad()
		}
		return 1, n + inputAllowance, nil
	}
	v.ForEach(func(_, item gjson.Result) bool {
		items++
		switch {
		case items > int64(most):
			e = invalid("invalid_request", param, "%s may have at most %d items.", param, most)
		case item.Type == gjson.String && (item.Str != "" || !nonEmpty):
			bound += int64(len(item.Str)) + inputAllowance
		case item.Type == gjson.String:
			e = invalid("invalid_request", param+"["+strconv.FormatInt(items-1, 10)+"]", "%s[%d] must not be empty.", param, items-1)
		case item.IsArray():
			n, ok := tokens(item)
			if !ok || (n == 0 && nonEmpty) {
				e = bad()
			}
			bound += n + inputAllowance
		default:
			e = bad()
		}
		return e == nil
	})
	return items, bound, e
}

// optional checks the optional parameters of an endpoint request: each
// absent, null, or of the kind its check accepts.
func optional(root gjson.Result, checks map[string]func(gjson.Result) bool, what map[string]string) *oaierror.Error {
	for name, ok := range checks {
		v := root.Get(name)
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		if !ok(v) {
			return invalid("invalid_request", name, "%s must be %s.", name, what[name])
		}
	}
	return nil
}

func isBool(v gjson.Result) bool   { return v.Type == gjson.True || v.Type == gjson.False }
func isString(v gjson.Result) bool { return v.Type == gjson.String }
func isInt(v gjson.Result) bool {
	return v.Type == gjson.Number && v.Num == float64(int64(v.Num))
}

// intIn is an integer check between lo and hi.
func intIn(lo, hi int64) func(gjson.Result) bool {
	return func(v gjson.Result) bool { return isInt(v) && v.Int() >= lo && v.Int() <= hi }
}

// numIn is a number check between lo and hi.
func numIn(lo, hi float64) func(gjson.Result) bool {
	return func(v gjson.Result) bool { return v.Type == gjson.Number && v.Num >= lo && v.Num <= hi }
}

// passAttempt sends an endpoint request on in its own wire format.
type passAttempt struct{ ep provider.Endpoint }

func (a passAttempt) translate(u *upstreamStep, _ provider.Adapter) (provider.Upstream, provider.Response, error) {
	return provider.EndpointUpstream(a.ep, &u.preq, u.target)
}

func (passAttempt) errorEvent(e oaierror.Error) []byte { return streamErrorEvent(e) }

func (passAttempt) completed(context.Context, *upstreamStep) {}

// takesPieces: an embedding, moderation or rerank answer is taken in
// pieces and handed back whole (provider.MaxAnswer), not buffered by the
// proxy, whose buffer a batch of embeddings passes.
func (a passAttempt) takesPieces() bool { return a.ep != provider.Completions }

// piecewise reports whether an attempt takes its whole answer in pieces.
func piecewise(part endpointAttempt) bool {
	p, ok := part.(interface{ takesPieces() bool })
	return ok && p.takesPieces()
}

// passEndpoint is the row of an endpoint family whose requests check
// validates and whose attempts go on as they are.
func passEndpoint(ep provider.Endpoint, path string, check func([]byte, *config.Config) (validChat, *oaierror.Error)) *endpoint {
	state := `{"endpoint":"` + string(ep) + `"}`
	return &endpoint{
		name: string(ep), path: path, method: "POST", check: check, state: state,
		attempt: func(*upstreamStep, string) (endpointAttempt, error) { return passAttempt{ep}, nil },
	}
}
