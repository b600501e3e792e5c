package provider

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Thought signatures
//
// Gemini's thinking models put a thoughtSignature (opaque bytes, base64 in
// JSON) on parts of their answers. Google's "Thought Signatures" page
// (https://ai.google.dev/gemini-api/docs/thought-signatures) says:
//   - a single function call's functionCall part carries one; of parallel
//     function calls only the first functionCall part does;
//   - it must come back "in the exact part where it was received" when the
//     history is sent again;
//   - Gemini 3 validates the current turn only (the model steps after the
//     newest user content that is not only functionResponses): the first
//     functionCall part of each of its steps must carry its signature, or
//     the request is refused with 400;
//   - for function calls Gemini did not sign (another model's trace, calls
//     the client made itself), its FAQ allows a dummy signature,
//     "context_engineering_is_the_way_to_go" or
//     "skip_thought_signature_validator"; Vertex AI's page documents the
//     latter only, so that is the one used here.
//
// An OpenAI assistant message's tool_calls have nothing but id, type and
// function, so the signature travels in the tool call id the client sees
// and sends back:
//
//	call_<n>-tgsig-<base64url of the signature's bytes>   (Gemini's canonical base64)
//	call_<n>-tgsigs-<base64url of the signature as text>  (anything else, kept verbatim)
//
// base64url is unpadded (RFC 4648 §5). Gemini's own ids are call_<n>, which
// never hold '-': the first '-' ends the base id, and the marker after it
// is Tollgate's. The whole id stays within [A-Za-z0-9_-], the pattern
// Anthropic requires of tool_use ids, so a deployment of the same public
// model at Anthropic does not refuse the history for its ids. OpenAI's SDKs type the id as a plain string and
// check no length, but OpenAI's API refuses assistant tool call ids over 40
// characters: a signed id cannot be that short, so a history with them
// cannot go on at OpenAI itself (as with LiteLLM's "__thought__" ids). The
// signature is therefore embedded only up to maxIDSignature bytes, which
// keeps an id near 11,000 characters at most; a larger one is dropped, and
// the next request gets the dummy where Gemini 3 needs one.
//
// Gemini's OpenAI-compatible endpoint carries the signature as
// tool_calls[].extra_content.google.thought_signature; a client that kept
// that field is understood too.
//
// Text parts may carry a signature as well; Google does not validate those
// and OpenAI's content has no room for one, so they are dropped.

// maxIDSignature caps the signature bytes put into a tool call id.
const maxIDSignature = 8 << 10

// geminiDummySignature is Google's documented signature for function calls
// that Gemini did not sign.
const geminiDummySignature = "skip_thought_signature_validator"

const (
	sigMarker         = "-tgsig-"  // the signature's bytes follow
	sigVerbatimMarker = "-tgsigs-" // the signature's text follows
)

// geminiToolCallID is the id of the n-th tool call of the answer answerID,
// carrying the function call part's signature if it has one. Gemini has no
// call ids: this one is unique across a conversation (the answer's id is
// in it), so that the conversation can go on with a provider that wants
// distinct ids (Anthropic's tool_use ids).
func geminiToolCallID(answerID string, n int, signature string) string {
	id := geminiCallBase(answerID, n)
	if signature == "" {
		return id
	}
	if b, err := base64.StdEncoding.Strict().DecodeString(signature); err == nil &&
		len(b) > 0 && base64.StdEncoding.EncodeToString(b) == signature {
		if len(b) > maxIDSignature {
			return id
		}
		return id + sigMarker + base64.RawURLEncoding.EncodeToString(b)
	}
	if len(signature) > maxIDSignature {
		return id
	}
	return id + sigVerbatimMarker + base64.RawURLEncoding.EncodeToString([]byte(signature))
}

// geminiCallBase is "call_", up to 24 letters, digits and underscores of
// the answer's id, and n: at most 40 characters (OpenAI's limit) and no
// '-' (which begins the signature part).
func geminiCallBase(answerID string, n int) string {
	var b strings.Builder
	b.WriteString("call_")
	kept := 0
	for i := 0; i < len(answerID) && kept < 24; i++ {
		c := answerID[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' {
			b.WriteByte(c)
			kept++
		}
	}
	b.WriteByte('_')
	b.WriteString(strconv.Itoa(n))
	return b.String()
}

// geminiIDSignature is the signature carried by a tool call id that
// geminiToolCallID made, "" for any other id (another provider's, a
// client's, or one whose signature part does not decode).
func geminiIDSignature(id string) string {
	i := strings.IndexByte(id, '-')
	if i <= 0 {
		return ""
	}
	rest := id[i:]
	verbatim := false
	payload, ok := strings.CutPrefix(rest, sigMarker)
	if !ok {
		if payload, ok = strings.CutPrefix(rest, sigVerbatimMarker); !ok {
			return ""
		}
		verbatim = true
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(payload)
	if err != nil || len(b) == 0 {
		return ""
	}
	if verbatim {
		if !utf8.Valid(b) {
			return ""
		}
		return string(b)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// signature is the thought signature a client's tool call carries: in its
// id, else in Gemini's extra_content.
func (c *ToolCall) signature() string {
	if s := geminiIDSignature(c.ID); s != "" {
		return s
	}
	if e := c.ExtraContent; e != nil && e.Google != nil {
		return e.Google.ThoughtSignature
	}
	return ""
}

// geminiValidatesSignatures reports whether the model is of the Gemini 3
// family or later, which refuses a current turn whose function calls lack
// signatures. Earlier models take function calls without one and are not
// documented to accept the dummy, so they get none. The version is read
// from the model name (gemini-3-pro-preview, gemini-3.1-flash…); an alias
// without a version (gemini-flash-latest) gets no dummy either.
func geminiValidatesSignatures(model string) bool {
	rest, ok := strings.CutPrefix(strings.TrimPrefix(model, "models/"), "gemini-")
	if !ok {
		return false
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	major, err := strconv.Atoi(rest[:end])
	return err == nil && major >= 3
}

// geminiSignCurrentTurn gives the first functionCall part of each model step
// of the current turn that lacks a signature the dummy one. The current
// turn starts after the newest user content with a part that is not a
// functionResponse (Google's definition); with none, all is one turn.
func geminiSignCurrentTurn(contents []geminiContent) {
	for i := geminiTurnStart(contents); i < len(contents); i++ {
		if contents[i].Role != "model" {
			continue
		}
		parts := contents[i].Parts
		for j := range parts {
			if parts[j].FunctionCall == nil {
				continue
			}
			if parts[j].ThoughtSignature == "" {
				parts[j].ThoughtSignature = geminiDummySignature
			}
			break
		}
	}
}

// geminiTurnStart is the index of the first content after the newest user
// content that holds more than functionResponses, 0 if there is none.
func geminiTurnStart(contents []geminiContent) int {
	for i := len(contents) - 1; i >= 0; i-- {
		if contents[i].Role != "user" {
			continue
		}
		for _, p := range contents[i].Parts {
			if p.FunctionResponse == nil {
				return i + 1
			}
		}
	}
	return 0
}

// unsignedToolCallID is id without the signature geminiToolCallID put in
// it; any other id is returned as it is. Providers other than Gemini get
// this: OpenAI refuses tool call ids longer than 40 characters, and no
// provider but Gemini has a use for the signature, so a conversation begun
// on Gemini can go on elsewhere.
func unsignedToolCallID(id string) string {
	if geminiIDSignature(id) == "" {
		return id
	}
	return id[:strings.IndexByte(id, '-')]
}

// unsignToolCallIDs rewrites, in an OpenAI-shaped body, every tool call id
// and tool_call_id that carries a Gemini signature to its unsigned form.
// Bodies without the marker (nearly all) are returned untouched, unparsed.
func unsignToolCallIDs(body []byte) ([]byte, error) {
	if !bytes.Contains(body, []byte(sigMarker[:len(sigMarker)-1])) {
		return body, nil
	}
	type edit struct{ path, id string }
	var edits []edit
	gjson.GetBytes(body, "messages").ForEach(func(i, m gjson.Result) bool {
		if id := m.Get("tool_call_id").String(); unsignedToolCallID(id) != id {
			edits = append(edits, edit{fmt.Sprintf("messages.%d.tool_call_id", i.Int()), unsignedToolCallID(id)})
		}
		m.Get("tool_calls").ForEach(func(j, c gjson.Result) bool {
			if id := c.Get("id").String(); unsignedToolCallID(id) != id {
				edits = append(edits, edit{fmt.Sprintf("messages.%d.tool_calls.%d.id", i.Int(), j.Int()), unsignedToolCallID(id)})
			}
			return true
		})
		return true
	})
	var err error
	for _, e := range edits {
		if body, err = sjson.SetBytes(body, e.path, e.id); err != nil {
			return nil, fmt.Errorf("rewrite %s: %w", e.path, err)
		}
	}
	return body, nil
}
