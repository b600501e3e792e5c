package provider

import (
	"fmt"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/config"
)

// The output limit a provider receives is the one the router step held
// for (docs/decisions.md, "A request never costs more than its hold"): the
// smaller of the client's max_tokens and max_completion_tokens, or the
// model's max_tokens when the client gave neither. Each adapter sends it in
// the one field its provider honours, and no other.

// OutputLimit is the output limit of a chat body for a model whose maximum
// is modelMax: the smallest of the body's max_tokens and
// max_completion_tokens and modelMax (0 when there is none at all).
func OutputLimit(body []byte, modelMax int64) int64 {
	var v [3]gjson.Result
	topValues(body, "max_tokens", "max_completion_tokens", "", &v)
	return limitOf(&v[0], &v[1], modelMax)
}

func limitOf(maxTokens, maxCompletion *gjson.Result, modelMax int64) int64 {
	limit := modelMax
	for _, v := range [2]*gjson.Result{maxTokens, maxCompletion} {
		if n := v.Int(); v.Type == gjson.Number && n > 0 && (limit <= 0 || n < limit) {
			limit = n
		}
	}
	return limit
}

// Choices is a chat body's n: how many answers share the output limit
// each (1 when absent).
func Choices(body []byte) int64 {
	var v [3]gjson.Result
	topValues(body, "n", "", "", &v)
	return max(v[0].Int(), 1)
}

// HeldOutput is the most output tokens a request may be answered with:
// its output limit for each of its answers.
func HeldOutput(body []byte, m *config.Model) int64 {
	var v [3]gjson.Result
	topValues(body, "max_tokens", "max_completion_tokens", "n", &v)
	return limitOf(&v[0], &v[1], int64(m.MaxTokens)) * max(v[2].Int(), 1)
}

// topValues finds the values of up to three keys at the top level of a
// JSON object (the first of each, as gjson.Get finds it; an empty key
// finds nothing) in one walk of the top level, into v. gjson's GetMany
// walks it once a key, and a long conversation's messages, which each
// walk steps over, are most of a body.
//
// The values alias body (read in place, not copied): they are for reading
// while body is unchanged.
func topValues(body []byte, k0, k1, k2 string, v *[3]gjson.Result) {
	root := parseInPlace(body)
	if !root.IsObject() {
		return
	}
	root.ForEach(func(k, val gjson.Result) bool {
		switch {
		case k0 != "" && k.Str == k0 && !v[0].Exists():
			v[0] = val
		case k1 != "" && k.Str == k1 && !v[1].Exists():
			v[1] = val
		case k2 != "" && k.Str == k2 && !v[2].Exists():
			v[2] = val
		}
		return true
	})
}

// OpenAILimitField is the field an OpenAI-type server honours for the
// output limit: max_completion_tokens for reasoning models (OpenAI's
// o-series and gpt-5 refuse max_tokens, and it counts their hidden
// reasoning tokens), max_tokens for the rest (every OpenAI-compatible
// server knows it).
func OpenAILimitField(m *config.Model) string {
	if m != nil && m.Reasoning {
		return "max_completion_tokens"
	}
	return "max_tokens"
}

// LimitBody returns body with limit as its only output limit, in field
// (max_tokens or max_completion_tokens). The body is returned as it is
// when it already is so.
func LimitBody(body []byte, field string, limit int64) ([]byte, error) {
	return limitBody(body, field, limit, false)
}

// LimitToHeld is LimitBody(body, field, OutputLimit(body, modelMax)), the
// body's top level read once for both.
func LimitToHeld(body []byte, field string, modelMax int64) ([]byte, error) {
	return limitBody(body, field, modelMax, true)
}

// limitBody is LimitBody; with fromBody, limit is the model's and the
// output limit is the body's own, as OutputLimit reads it. The body is
// read in a frame that is gone before it is rewritten (a stream's
// goroutine keeps the stack its deepest work grew it to).
func limitBody(body []byte, field string, limit int64, fromBody bool) ([]byte, error) {
	other := "max_tokens"
	if field == other {
		other = "max_completion_tokens"
	}
	limit, done, hasOther := limitPlan(body, field, other, limit, fromBody)
	if done {
		return body, nil
	}
	out := body
	var err error
	if hasOther {
		if out, err = sjson.DeleteBytes(out, other); err != nil {
			return nil, fmt.Errorf("remove %s: %w", other, err)
		}
	}
	if out, err = sjson.SetBytes(out, field, limit); err != nil {
		return nil, fmt.Errorf("set %s: %w", field, err)
	}
	return out, nil
}

// limitPlan reads the body's limits: the limit to set (the body's own
// output limit under limit, with fromBody), whether the body already has
// it alone in field, and whether it has the other field.
//
//go:noinline
func limitPlan(body []byte, field, other string, limit int64, fromBody bool) (int64, bool, bool) {
	third := ""
	if field != "max_tokens" && field != "max_completion_tokens" {
		third = field
	}
	var all [3]gjson.Result
	topValues(body, "max_tokens", "max_completion_tokens", third, &all)
	if fromBody {
		limit = limitOf(&all[0], &all[1], limit)
	}
	at := func(name string) *gjson.Result {
		switch name {
		case "max_tokens":
			return &all[0]
		case "max_completion_tokens":
			return &all[1]
		}
		return &all[2]
	}
	f, o := at(field), at(other)
	return limit, f.Type == gjson.Number && f.Int() == limit && f.Num == float64(limit) && !o.Exists(), o.Exists()
}
