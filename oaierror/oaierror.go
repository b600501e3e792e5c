// Package oaierror is the one list of errors a client can get from
// Tollgate, each with its HTTP status and OpenAI-shaped body
// ({"error":{"message","type","param","code"}}), so that OpenAI SDKs surface
// them unchanged; the Messages API's clients get the same errors in
// Anthropic's shape (anthropic.go). Nothing else reaches a client: internal
// causes are logged, never sent.
package oaierror

import (
	"encoding/json"
	"net/http"
	"unicode/utf8"
)

// Error is one client-facing error.
type Error struct {
	Status  int
	Code    string
	Type    string
	Message string
	Param   string // empty: null
}

// Error makes e a Go error (its code and message), so that a service can
// return it and its HTTP face answer it as it is (errors.As).
func (e Error) Error() string { return e.Code + ": " + e.Message }

// Body is the JSON body of e.
func (e Error) Body() []byte {
	var param *string
	if e.Param != "" {
		param = &e.Param
	}
	b, err := json.Marshal(Envelope{Error: Detail{Message: e.Message, Type: e.Type, Param: param, Code: e.Code}})
	if err != nil { // unreachable with these field types
		return []byte(`{"error":{"message":"internal error","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	return b
}

// With returns e with another message and param.
func (e Error) With(message, param string) Error {
	e.Message, e.Param = message, param
	return e
}

// ForRequest names the request in the message of a server-side error (5xx),
// so that a user can quote it; other errors, and an empty id, are left as
// they are.
func (e Error) ForRequest(requestID string) Error {
	if e.Status >= 500 && requestID != "" {
		e.Message += " (request id: " + requestID + ")"
	}
	return e
}

// Envelope is OpenAI's error body.
type Envelope struct {
	Error Detail `json:"error"`
}

// Detail is the inside of Envelope.
type Detail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// Types.
const (
	TypeAuthentication     = "authentication_error"
	TypePermission         = "permission_error"
	TypeRateLimit          = "rate_limit_error"
	TypeInsufficientQuota  = "insufficient_quota"
	TypeInvalidRequest     = "invalid_request_error"
	TypeServiceUnavailable = "service_unavailable"
	TypeServer             = "server_error"
)

// The errors of docs/api.md, in check order.
var (
	MissingAPIKey = Error{http.StatusUnauthorized, "missing_api_key", TypeAuthentication,
		"You didn't provide an API key. Send it in the Authorization header: Authorization: Bearer <key>.", ""}
	// MissingMessagesAPIKey is MissingAPIKey for the Messages API's
	// clients, which send the key in x-api-key.
	MissingMessagesAPIKey = Error{http.StatusUnauthorized, "missing_api_key", TypeAuthentication,
		"You didn't provide an API key. Send it in the x-api-key header: x-api-key: <key>.", ""}
	InvalidAPIKey = Error{http.StatusUnauthorized, "invalid_api_key", TypeAuthentication,
		"Incorrect API key provided.", ""}
	KeyDisabled = Error{http.StatusUnauthorized, "key_disabled", TypeAuthentication,
		"This API key is disabled. Enable it in the dashboard or use another key.", ""}
	KeyExpired = Error{http.StatusUnauthorized, "key_expired", TypeAuthentication,
		"This API key has expired. Move its expiry date forward or use another key.", ""}
	IPNotAllowed = Error{http.StatusForbidden, "ip_not_allowed", TypePermission,
		"Requests from your IP address are not allowed for this API key.", ""}
	RateLimited = Error{http.StatusTooManyRequests, "rate_limit_exceeded", TypeRateLimit,
		"Rate limit reached for this API key (requests per minute). Retry after the time in the Retry-After header.", ""}
	InsufficientBalance = Error{http.StatusPaymentRequired, "insufficient_balance", TypeInsufficientQuota,
		"Your account balance is too low for this request. Add credit to continue.", ""}
	// BudgetExceeded is a key's or account's spend budget that cannot
	// cover a request in its current window; the message names the budget
	// and when it resets.
	BudgetExceeded = Error{http.StatusTooManyRequests, "budget_exceeded", TypeInsufficientQuota,
		"A spend budget of this API key or account is spent. Retry after the time in the Retry-After header.", ""}
	// BudgetHeld is a spend budget that could cover a request were it not
	// for the holds of requests in flight: a momentary refusal, retried
	// after a second (Retry-After); the message names the budget.
	BudgetHeld = Error{http.StatusTooManyRequests, "budget_held", TypeRateLimit,
		"A spend budget of this API key or account is held by requests in flight. Retry after the time in the Retry-After header.", ""}
	ModelNotAllowed = Error{http.StatusForbidden, "model_not_allowed", TypePermission,
		"This API key, its team or your plan does not give access to this model.", "model"}
	NoAvailableWorkers = Error{http.StatusServiceUnavailable, "no_available_workers", TypeServiceUnavailable,
		"No provider is available to serve this model right now; please retry.", ""}
	// Overloaded refuses a new request while the replica is at capacity
	// (package admission), with a Retry-After: the same code as any other
	// momentary unavailability, so clients retry it as they would.
	Overloaded = Error{http.StatusServiceUnavailable, "no_available_workers", TypeServiceUnavailable,
		"Tollgate is at capacity right now; please retry shortly.", ""}
	// Busy refuses a request that Tollgate could not check in time: its
	// database or Redis did not answer within the step's deadline. It
	// comes with a Retry-After of a second; nothing was held or sent.
	Busy = Error{http.StatusServiceUnavailable, "no_available_workers", TypeServiceUnavailable,
		"Tollgate could not check this request in time; please retry.", ""}
	// StepTimedOut is the proxy's answer when a step of Tollgate's did not
	// answer it in time (Envoy's ext_proc message timeout); clients retry
	// a 504 as any 5xx. A step answers a slow database itself, with Busy,
	// well before; this is for a Tollgate that is stuck.
	StepTimedOut = Error{http.StatusGatewayTimeout, "timeout", TypeServer,
		"Tollgate did not answer in time; please retry.", ""}
	// UpstreamFailed is not a status of its own: it is the error event that
	// ends a stream whose provider failed after the answer began.
	UpstreamFailed = Error{http.StatusBadGateway, "upstream_error", TypeServer,
		"The provider failed while answering.", ""}
	Internal = Error{http.StatusInternalServerError, "internal_error", TypeServer,
		"The server had an error while processing your request.", ""}
	NotFound = Error{http.StatusNotFound, "not_found", TypeInvalidRequest,
		"Unknown path. Tollgate serves POST /v1/chat/completions, /v1/responses, /v1/messages, /v1/embeddings, /v1/completions, /v1/moderations and /v1/rerank, and GET /v1/models.", ""}
	// ModelNotFound answers GET /v1/models/{model} for a model that does
	// not exist or that the key may not use now (the two are not told
	// apart).
	ModelNotFound = Error{http.StatusNotFound, "model_not_found", TypeInvalidRequest,
		"The model does not exist or you do not have access to it.", "model"}
	MethodNotAllowed = Error{http.StatusMethodNotAllowed, "method_not_allowed", TypeInvalidRequest,
		"Method not allowed on this path.", ""}
	// ContextLengthExceeded is a request that certainly does not fit the
	// model's context window (its output limit leaves no room for the
	// prompt), in OpenAI's words; the message names the window and what
	// was asked.
	ContextLengthExceeded = Error{http.StatusBadRequest, "context_length_exceeded", TypeInvalidRequest,
		"This model's maximum context length is exceeded. Please reduce the length of the messages or completion.", "messages"}
	BodyTooLarge = Error{http.StatusRequestEntityTooLarge, "request_too_large", TypeInvalidRequest,
		"The request body is larger than this server accepts.", ""}
)

// Invalid is a 400 invalid_request_error with a specific code (invalid_model,
// invalid_messages, invalid_temperature, invalid_max_tokens, invalid_stop,
// invalid_request…) and the offending parameter.
func Invalid(code, param, message string) Error {
	return Error{Status: http.StatusBadRequest, Code: code, Type: TypeInvalidRequest, Message: message, Param: param}
}

// Clip shortens text quoted in an error message to at most max bytes,
// never cutting a UTF-8 character in half, and marks the cut with "…".
func Clip(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
