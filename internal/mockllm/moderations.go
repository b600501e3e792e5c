package mockllm

import (
	"fmt"
	"net/http"
	"strings"
	"unicode"
)

// moderationCategories are OpenAI's 13 moderation categories; imageCategories
// are those omni-moderation also scores images for.
var (
	moderationCategories = []string{"harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
		"illicit/violent", "self-harm", "self-harm/intent", "self-harm/instructions", "sexual", "sexual/minors",
		"violence", "violence/graphic"}
	imageCategories = map[string]bool{"self-harm": true, "self-harm/intent": true, "self-harm/instructions": true,
		"sexual": true, "violence": true, "violence/graphic": true}
)

// ForbiddenWord is the word that makes the mock's moderation flag an input
// (as violence): the only thing it flags, whatever the case.
const ForbiddenWord = "forbidden"

// moderated is one input to moderate: its text, and whether it holds an
// image.
type moderated struct {
	text  string
	image bool
}

// moderationInputs reads OpenAI's input: a string, an array of strings
// (an input each), or an array of text and image_url parts (one input);
// or says why OpenAI refuses it.
func moderationInputs(v any) ([]moderated, string) {
	const invalid = "'$.input' is invalid: "
	switch x := v.(type) {
	case nil:
		return nil, "'input' is a required property"
	case string:
		return []moderated{{text: x}}, ""
	case []any:
		if len(x) == 0 {
			return nil, invalid + "it must not be an empty array"
		}
		if len(x) > maxInputs {
			return nil, fmt.Sprintf(invalid+"it holds %d inputs, more than the mock's %d", len(x), maxInputs)
		}
		if _, parts := x[0].(map[string]any); parts {
			return moderationParts(x)
		}
		out := make([]moderated, len(x))
		for i, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Sprintf(invalid+"input %d is not a string like the others", i)
			}
			out[i].text = s
		}
		return out, ""
	}
	return nil, invalid + "it must be a string, an array of strings or an array of parts"
}

// moderationParts reads a multimodal input: one input of every part.
func moderationParts(parts []any) ([]moderated, string) {
	var m moderated
	var texts []string
	for i, e := range parts {
		p, _ := e.(map[string]any)
		switch p["type"] {
		case "text":
			s, ok := p["text"].(string)
			if !ok {
				return nil, fmt.Sprintf("'$.input[%d].text' is a required string", i)
			}
			texts = append(texts, s)
		case "image_url":
			if _, ok := object(p["image_url"])["url"].(string); !ok {
				return nil, fmt.Sprintf("'$.input[%d].image_url.url' is a required string", i)
			}
			m.image = true
		default:
			return nil, fmt.Sprintf("'$.input[%d].type' must be 'text' or 'image_url'", i)
		}
	}
	m.text = strings.Join(texts, "\n")
	return []moderated{m}, ""
}

// forbidden reports whether text holds ForbiddenWord as a word.
func forbidden(text string) bool {
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if strings.EqualFold(w, ForbiddenWord) {
			return true
		}
	}
	return false
}

// result is the moderation of one input: flagged (as violence) when its
// text holds ForbiddenWord, every category scored, and each category's
// input types (text when the input has text, image too for the categories
// that score images when it has an image).
func (in moderated) result() map[string]any {
	flagged := forbidden(in.text)
	categories, scores, types := map[string]any{}, map[string]any{}, map[string]any{}
	for _, c := range moderationCategories {
		categories[c], scores[c] = false, 1e-6
		applied := []string{}
		if in.text != "" || !in.image {
			applied = append(applied, "text")
		}
		if in.image && imageCategories[c] {
			applied = append(applied, "image")
		}
		types[c] = applied
	}
	if flagged {
		categories["violence"], scores["violence"] = true, 0.97
	}
	return map[string]any{"flagged": flagged, "categories": categories, "category_scores": scores,
		"category_applied_input_types": types}
}

// moderations answers OpenAI's (and Azure's) moderations: a result per
// input, in order (one for an array of parts). Like OpenAI's, the answer
// reports no usage; the model is the request's, omni-moderation-latest
// when it names none.
func (m *Mock) moderations(w http.ResponseWriter, req *Request, p Play) {
	inputs, msg := moderationInputs(req.Body["input"])
	if msg != "" {
		m.refuse(w, req.Format, "input", msg)
		return
	}
	results := make([]any, len(inputs))
	for i, in := range inputs {
		results[i] = in.result()
	}
	model := modelOf(req)
	if _, named := req.Body["model"].(string); !named {
		model = "omni-moderation-latest"
	}
	writeWhole(w, map[string]any{"id": "modr-mock" + string(req.Format), "model": model, "results": results}, p)
}
