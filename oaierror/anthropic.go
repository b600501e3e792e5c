package oaierror

import (
	"encoding/json"
	"net/http"
	"strings"
)

// The same errors in the shape of Anthropic's Messages API, for the clients
// of /v1/messages (Anthropic's SDKs, Claude Code), which read
// {"type":"error","error":{"type","message"}} and raise by its type. The
// status stays Tollgate's; the type is Anthropic's word for it.

// Anthropic's error types.
const (
	AnthropicInvalidRequest  = "invalid_request_error"
	AnthropicAuthentication  = "authentication_error"
	AnthropicBilling         = "billing_error"
	AnthropicPermission      = "permission_error"
	AnthropicNotFound        = "not_found_error"
	AnthropicRequestTooLarge = "request_too_large"
	AnthropicRateLimit       = "rate_limit_error"
	AnthropicAPI             = "api_error"
	AnthropicTimeout         = "timeout_error"
	AnthropicOverloaded      = "overloaded_error"
)

// AnthropicType is Anthropic's error type for e, from its status.
func (e Error) AnthropicType() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return AnthropicAuthentication
	case http.StatusPaymentRequired:
		return AnthropicBilling
	case http.StatusForbidden:
		return AnthropicPermission
	case http.StatusNotFound:
		return AnthropicNotFound
	case http.StatusRequestEntityTooLarge:
		return AnthropicRequestTooLarge
	case http.StatusTooManyRequests:
		return AnthropicRateLimit
	case http.StatusServiceUnavailable, 529:
		return AnthropicOverloaded
	case http.StatusGatewayTimeout:
		return AnthropicTimeout
	}
	if e.Status >= 500 {
		return AnthropicAPI
	}
	return AnthropicInvalidRequest
}

// AnthropicEnvelope is Anthropic's error body.
type AnthropicEnvelope struct {
	Type  string          `json:"type"` // always "error"
	Error AnthropicDetail `json:"error"`
}

// AnthropicDetail is the inside of AnthropicEnvelope.
type AnthropicDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// AnthropicBody is e's body in Anthropic's shape. Tollgate's own code
// (budget_exceeded, model_not_allowed…), which Anthropic's shape has no
// field for, leads the message, so that a user can still tell the
// refusals apart.
func (e Error) AnthropicBody() []byte {
	msg := e.Message
	if e.Code != "" && !strings.HasPrefix(msg, e.Code) {
		msg = e.Code + ": " + msg
	}
	b, err := json.Marshal(AnthropicEnvelope{Type: "error", Error: AnthropicDetail{Type: e.AnthropicType(), Message: msg}})
	if err != nil { // unreachable with these field types
		return []byte(`{"type":"error","error":{"type":"api_error","message":"internal error"}}`)
	}
	return b
}

// Shape is the error shape a client reads: OpenAI's (the zero value) or
// Anthropic's.
type Shape uint8

const (
	ShapeOpenAI Shape = iota
	ShapeAnthropic
)

// ShapeOf is the error shape of a request path: Anthropic's for the
// Messages API (/v1/messages and below), OpenAI's for every other.
func ShapeOf(path string) Shape {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	if path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/") {
		return ShapeAnthropic
	}
	return ShapeOpenAI
}

// BodyFor is e's body in shape s.
func (e Error) BodyFor(s Shape) []byte {
	if s == ShapeAnthropic {
		return e.AnthropicBody()
	}
	return e.Body()
}
