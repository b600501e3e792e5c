package provider

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/oaierror"
)

// UpstreamError turns a provider's error response (any provider's shape, or
// none) into the status and OpenAI-shaped body the client gets:
//   - 400, 404 (model or deployment not found is a bad request to us too),
//     413 and 422: 400 invalid_request with the provider's message, which
//     tells the client what is wrong with its request (context too long…);
//   - 401 and 403: Tollgate's own credential was refused; the client cannot
//     fix that, so 500 internal_error without the provider's text (it may
//     echo part of the credential);
//   - 408, 429, 5xx (and Anthropic's 529): 503 no_available_workers — the
//     deployment failed, and failover had nothing left to try.
//
// The provider's error code is kept when it is a string (OpenAI's and
// Azure's codes); Azure's "type": null and Gemini's numeric code and status
// are not carried over.
func UpstreamError(status int, body []byte) (int, []byte) {
	msg := providerMessage(body)
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return http.StatusInternalServerError, oaierror.Internal.With(
			"The provider refused Tollgate's credentials; the administrator has been told.", "").Body()
	case status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500:
		m := "No provider could serve this request right now; please retry."
		if msg != "" {
			m += " Last provider error: " + msg
		}
		return http.StatusServiceUnavailable, oaierror.NoAvailableWorkers.With(m, "").Body()
	default:
		if msg == "" {
			msg = "The provider rejected the request (HTTP " + http.StatusText(status) + ")."
		}
		// Only a string code is OpenAI's kind; Gemini's is the HTTP status
		// as a number.
		code := ""
		if c := gjson.GetBytes(body, "error.code"); c.Type == gjson.String {
			code = c.String()
		}
		if code == "" || !isIdent(code) {
			code = "invalid_request"
		}
		param := ""
		if p := gjson.GetBytes(body, "error.param"); p.Type == gjson.String {
			param = p.String()
		} else if _, p := validationDetail(body); p != "" {
			param = p
		}
		return http.StatusBadRequest, oaierror.Invalid(code, param, msg).Body()
	}
}

// providerMessage finds the human message in the error shapes providers use:
// {"error":{"message":…}} (OpenAI, Azure, Anthropic, Gemini), {"message":…},
// {"error":"…"} (some OpenAI-compatible servers), a validation error's
// detail (validationDetail), or plain text.
func providerMessage(body []byte) string {
	if msg, _ := validationDetail(body); msg != "" {
		return truncate(msg)
	}
	if gjson.ValidBytes(body) {
		for _, path := range []string{"error.message", "message", "error", "detail", "0.error.message"} {
			if r := gjson.GetBytes(body, path); r.Type == gjson.String && r.String() != "" {
				return truncate(r.String())
			}
		}
		return ""
	}
	return truncate(strings.TrimSpace(string(body)))
}

// truncate shortens a provider's message quoted to a client.
func truncate(s string) string { return oaierror.Clip(s, 500) }

func isIdent(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// StreamErrorEvent is the SSE event that ends a stream whose provider failed
// midway, as OpenAI itself reports such errors. No [DONE] follows it: a
// client must not mistake a broken answer for a complete one.
func StreamErrorEvent(message string) []byte {
	b := oaierror.UpstreamFailed.With(message, "").Body()
	out := make([]byte, 0, len(b)+16)
	out = append(out, "data: "...)
	out = append(out, b...)
	out = append(out, "\n\n"...)
	return out
}

// validationDetail reads the validation error of servers built on FastAPI
// (Mistral's 422): {"detail":[{"loc":["body","stream_options"],"msg":…}]},
// also found wrapped as {"message":{"detail":[…]}}. The message is each
// item's location and msg; param is the first item's location (without
// "body"). Both are "" for any other body.
func validationDetail(body []byte) (msg, param string) {
	d := gjson.GetBytes(body, "detail")
	if !d.IsArray() {
		d = gjson.GetBytes(body, "message.detail")
	}
	if !d.IsArray() {
		return "", ""
	}
	var b strings.Builder
	d.ForEach(func(_, item gjson.Result) bool {
		m := item.Get("msg").String()
		if m == "" {
			return true
		}
		var loc []string
		item.Get("loc").ForEach(func(i, l gjson.Result) bool {
			if i.Int() > 0 || l.String() != "body" {
				loc = append(loc, l.String())
			}
			return true
		})
		where := strings.Join(loc, ".")
		if param == "" {
			param = where
		}
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		if where != "" {
			b.WriteString(where + ": ")
		}
		b.WriteString(m)
		return b.Len() < 500
	})
	return b.String(), param
}
