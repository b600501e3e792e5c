package extproc

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
)

// This file builds the steps' usual answers — a phase's CommonResponse
// with a header mutation and a body mutation — in one allocation for the
// answer and its header mutation and one for a body mutation, not one per
// message of the answer (the response, its phase, the common response,
// each mutation): every message of every request makes one.

// phase is the ext_proc phase an answer answers.
type phase int

const (
	phaseRequestHeaders phase = iota
	phaseRequestBody
	phaseResponseHeaders
	phaseResponseBody
)

// answer is a ProcessingResponse and the messages every answer has.
type answer struct {
	resp    extprocv3.ProcessingResponse
	reqH    extprocv3.ProcessingResponse_RequestHeaders
	reqB    extprocv3.ProcessingResponse_RequestBody
	resH    extprocv3.ProcessingResponse_ResponseHeaders
	resB    extprocv3.ProcessingResponse_ResponseBody
	headers extprocv3.HeadersResponse
	body    extprocv3.BodyResponse
	common  extprocv3.CommonResponse
	mut     extprocv3.HeaderMutation
}

// newAnswer is an answer to p that continues unchanged.
func newAnswer(p phase) *answer {
	a := new(answer)
	switch p {
	case phaseRequestHeaders:
		a.headers.Response, a.reqH.RequestHeaders, a.resp.Response = &a.common, &a.headers, &a.reqH
	case phaseRequestBody:
		a.body.Response, a.reqB.RequestBody, a.resp.Response = &a.common, &a.body, &a.reqB
	case phaseResponseHeaders:
		a.headers.Response, a.resH.ResponseHeaders, a.resp.Response = &a.common, &a.headers, &a.resH
	case phaseResponseBody:
		a.body.Response, a.resB.ResponseBody, a.resp.Response = &a.common, &a.body, &a.resB
	}
	return a
}

// setHeaders sets and removes headers (either may be nil).
func (a *answer) setHeaders(set []*corev3.HeaderValueOption, remove []string) *answer {
	a.mut.SetHeaders, a.mut.RemoveHeaders = set, remove
	a.common.HeaderMutation = &a.mut
	return a
}

// replaceBody replaces the body with b.
func (a *answer) replaceBody(b []byte) *answer {
	m := new(bodyMutation)
	m.body.Body = b
	m.mut.Mutation = &m.body
	a.common.BodyMutation = &m.mut
	return a
}

// bodyMutation is a BodyMutation that replaces the body.
type bodyMutation struct {
	mut  extprocv3.BodyMutation
	body extprocv3.BodyMutation_Body
}

// msg is the answer's message.
func (a *answer) msg() *extprocv3.ProcessingResponse { return &a.resp }
