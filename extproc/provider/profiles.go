package provider

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/config"
)

// An openai-type provider may have a profile (config.Profiles): the
// OpenAI-compatible server it is. The profile decides the output-limit
// field sent, whether stream_options is sent, which parameters are
// refused before the request leaves, and whether a message's name is
// dropped; everything else is the openai type's.

// limitField is the output-limit field the target's server honours.
func limitField(t Target) string {
	if prof := t.Provider.ProfileOf(); prof != nil && prof.LimitField != "" {
		return prof.LimitField
	}
	return OpenAILimitField(t.Model)
}

// profileBody renames the parameters the profile's server knows under
// another name, refuses a body that sets a parameter the server refuses,
// and removes such a parameter when it has its neutral value (as
// n: 1): the server refuses the field itself, and the neutral value means
// what its absence means. A message's name is dropped for a server that
// refuses it.
func profileBody(prof *config.Profile, body []byte) ([]byte, error) {
	if prof == nil {
		return body, nil
	}
	if prof.DropsMessageName {
		var err error
		if body, err = withoutMessageField(body, "name"); err != nil {
			return nil, err
		}
	}
	for from, to := range prof.Renames {
		v := gjson.GetBytes(body, from)
		if !v.Exists() {
			continue
		}
		out, err := sjson.DeleteBytes(body, from)
		if err == nil && v.Type != gjson.Null {
			out, err = sjson.SetRawBytes(out, to, []byte(v.Raw))
		}
		if err != nil {
			return nil, fmt.Errorf("rename %s: %w", from, err)
		}
		body = out
	}
	vs := gjson.GetManyBytes(body, prof.Refuses...)
	for i, v := range vs {
		if !v.Exists() {
			continue
		}
		if p, ok := parameterIndex[prof.Refuses[i]]; v.Type != gjson.Null && (!ok || p.Neutral == nil || !p.Neutral(v)) {
			return nil, &UnsupportedParameterError{Param: prof.Refuses[i], ProviderType: prof.Name}
		}
		out, err := sjson.DeleteBytes(body, prof.Refuses[i])
		if err != nil {
			return nil, fmt.Errorf("remove %s: %w", prof.Refuses[i], err)
		}
		body = out
	}
	return body, nil
}

// streamUsage sets what a streamed body asks of usage: include_usage when
// Tollgate asks the provider for it (config.Provider.SendsStreamUsage) and
// the client did not, and no stream_options at all for a server that
// refuses the field. It reports whether Tollgate asked, so that the answer
// strips the usage chunk only then.
func streamUsage(body []byte, req *Request, p *config.Provider) ([]byte, bool, error) {
	if !req.Stream {
		return body, false, nil
	}
	if prof := p.ProfileOf(); prof != nil && prof.StripStreamOptions {
		if !gjson.GetBytes(body, "stream_options").Exists() {
			return body, false, nil
		}
		out, err := sjson.DeleteBytes(body, "stream_options")
		if err != nil {
			return nil, false, fmt.Errorf("remove stream_options: %w", err)
		}
		return out, false, nil
	}
	if req.ClientUsage || !p.SendsStreamUsage() {
		return body, false, nil
	}
	out, err := sjson.SetBytes(body, "stream_options.include_usage", true)
	if err != nil {
		return nil, false, fmt.Errorf("set include_usage: %w", err)
	}
	return out, true, nil
}

// ProfileTable is docs/providers.md's table of profiles.
func ProfileTable() string {
	var b strings.Builder
	b.WriteString("| `type` | default `base_url` | output limit | stream usage | refused | quirks |\n|---|---|---|---|---|---|\n")
	for _, p := range config.Profiles {
		limit := "`max_tokens` (`max_completion_tokens` for a reasoning model)"
		if p.LimitField != "" {
			limit = "`" + p.LimitField + "`"
		}
		usage := "`stream_options.include_usage`"
		switch {
		case p.StreamOptions:
		case p.StripStreamOptions:
			usage = "no `stream_options` (removed); " + p.Usage
		default:
			usage = "no `stream_options`; " + p.Usage
		}
		refused := make([]string, len(p.Refuses))
		for i, r := range p.Refuses {
			refused[i] = "`" + r + "`"
		}
		quirks := p.Quirks
		if p.DropsMessageName {
			quirks = "a message's `name` dropped (the server refuses it); " + quirks
		}
		for _, from := range slices.Sorted(maps.Keys(p.Renames)) {
			quirks = "`" + from + "` as `" + p.Renames[from] + "`; " + quirks
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s | %s |\n", p.Name, p.BaseURL, limit, usage, strings.Join(refused, ", "), strings.TrimSuffix(quirks, "; "))
	}
	return b.String()
}

// ReasoningBack is a translated chat body (the Responses or Messages API's)
// for the target: the reasoning_content the translation carried on
// assistant messages stays only for a server whose profile takes it back
// (config.Profile.ReasoningContent); any other gets none.
func ReasoningBack(t Target, body []byte) ([]byte, error) {
	if prof := t.Provider.ProfileOf(); prof != nil && prof.ReasoningContent && t.Provider.Type == config.TypeOpenAI {
		return body, nil
	}
	return withoutMessageField(body, "reasoning_content")
}

// withoutMessageField removes field from every message of a chat body.
func withoutMessageField(body []byte, field string) ([]byte, error) {
	var with []int
	i := 0
	gjson.GetBytes(body, "messages").ForEach(func(_, m gjson.Result) bool {
		if m.Get(field).Exists() {
			with = append(with, i)
		}
		i++
		return true
	})
	for _, i := range with {
		out, err := sjson.DeleteBytes(body, fmt.Sprintf("messages.%d.%s", i, field))
		if err != nil {
			return nil, fmt.Errorf("remove messages[%d].%s: %w", i, field, err)
		}
		body = out
	}
	return body, nil
}
