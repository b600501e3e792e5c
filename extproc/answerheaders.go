package extproc

import (
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/tollgate/tollgate/envoy/contract"
)

// hopByHop are the framing headers of a connection: the proxy's own, and
// never passed on by it anyway.
var hopByHop = []string{"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}

// notPassedBack lists the provider's answer headers the client must not
// get: all but contract.AnswerHeaders, pseudo-headers, the framing and
// Tollgate's own internal headers (which the steps set and read). Among
// them are the provider's length (the translation changes it) and its
// request id, which gives way to the request's.
func notPassedBack(hm *corev3.HeaderMap) []string {
	out := []string{"content-length", contract.HeaderRequestID}
	for _, h := range hm.GetHeaders() {
		name := h.GetKey()
		switch {
		case name == "" || name[0] == ':', slices.Contains(out, name):
		case slices.Contains(contract.AnswerHeaders, name), slices.Contains(hopByHop, name):
		case name == contract.HeaderTranslated, name == contract.HeaderAttemptCount:
		default:
			out = append(out, name)
		}
	}
	return out
}
