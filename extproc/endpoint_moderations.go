package extproc

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// moderationsEndpoint is POST /v1/moderations, in OpenAI's wire format, to
// OpenAI and Azure. A request without a model goes to the configuration's
// first moderation model, as OpenAI's goes to its default. OpenAI reports
// no usage for it: a priced moderation model is billed its input's
// estimate.
var moderationsEndpoint = passEndpoint(provider.Moderations, contract.PathModerations, checkModerations)

// MaxModerationInputs is the most inputs one moderation request may have.
const MaxModerationInputs = 2048

// checkModerations validates a moderation request: input as a string, an
// array of strings, or an array of parts ({"type":"text","text":…},
// {"type":"image_url","image_url":{"url":…}}).
func checkModerations(body []byte, cfg *config.Config) (validChat, *oaierror.Error) {
	root, cr, e := endpointRequest(body, cfg, config.KindModeration, true)
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	input := root.Get("input")
	bad := invalid("invalid_request", "input", "input must be a string, an array of strings, or an array of text and image_url parts.")
	switch {
	case input.Type == gjson.String:
		cr.PromptBound = int64(len(input.Str)) + inputAllowance
	case input.IsArray() && input.Get("0").Exists():
		n := int64(0)
		input.ForEach(func(_, item gjson.Result) bool {
			n++
			switch {
			case n > MaxModerationInputs:
				e = invalid("invalid_request", "input", "input may have at most %d items.", MaxModerationInputs)
			case item.Type == gjson.String:
				cr.PromptBound += int64(len(item.Str)) + inputAllowance
			case item.Get("type").Str == "text" && item.Get("text").Type == gjson.String:
				cr.PromptBound += int64(len(item.Get("text").Str)) + inputAllowance
			case item.Get("type").Str == "image_url" && item.Get("image_url.url").Type == gjson.String:
				cr.Images++
				cr.PromptBound += int64(cr.Model.ImageTokens) + inputAllowance
			default:
				e = bad
			}
			return e == nil
		})
	default:
		e = bad
	}
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	return cr, nil
}
