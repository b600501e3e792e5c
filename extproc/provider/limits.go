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
	v := topValues(body, "max_tokens", "max_completion_tokens", "")
	return limitOf(v[0], v[1], modelMax)
}

func limitOf(maxTokens, maxCompletion gjson.Result, modelMax int64) int64 {
	limit := modelMax
	for _, v := range [2]gjson.Result{maxTokens, maxCompletion} {
		if n := v.Int(); v.Type == gjson.Number && n > 0 && (limit <= 0 || n < limit) {
			limit = n
		}
	}
	return limit
}

// Choices is a chat body's n: how many answers share the output limit
// each (1 when absent).
func Choices(body []byte) int64 {
	return choices(topValues(body, "n", "", "")[0])
}

func choices(n gjson.Result) int64 { return max(n.Int(), 1) }

// HeldOutput is the most output tokens a request may be answered with:
// its output limit for each of its answers.
func HeldOutput(body []byte, m *config.Model) int64 {
	v := topValues(body, "max_tokens", "max_completion_tokens", "n")
	return limitOf(v[0], v[1], int64(m.MaxTokens)) * choices(v[2])
}

// topValues are the values of up to three keys at the top level of a JSON
// object (the first of each, as gjson.Get finds it; an empty key finds
// nothing), found in one walk of the top level. gjson's GetMany walks it
// once a key, and a long conversation's messages, which each walk steps
// over, are most of a body.
func topValues(body []byte, k0, k1, k2 string) (v [3]gjson.Result) {
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return v
	}
	root.ForEach(func(k, val gjson.Result) bool {
		for i, want := range [3]string{k0, k1, k2} {
			if want != "" && k.Str == want && !v[i].Exists() {
				v[i] = val
			}
		}
		return true
	})
	return v
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
	other := "max_tokens"
	if field == other {
		other = "max_completion_tokens"
	}
	vs := topValues(body, field, other, "")
	if vs[0].Type == gjson.Number && vs[0].Int() == limit && vs[0].Num == float64(limit) && !vs[1].Exists() {
		return body, nil
	}
	out := body
	var err error
	if vs[1].Exists() {
		if out, err = sjson.DeleteBytes(out, other); err != nil {
			return nil, fmt.Errorf("remove %s: %w", other, err)
		}
	}
	if out, err = sjson.SetBytes(out, field, limit); err != nil {
		return nil, fmt.Errorf("set %s: %w", field, err)
	}
	return out, nil
}
