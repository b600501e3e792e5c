package edge

import (
	"context"
	"hash/maphash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/oaierror"
)

// This file holds header maps as Envoy holds them, Envoy's mutation
// semantics, and the writing of replies.

// headers is a request's or response's headers as Envoy holds them:
// lowercase names, pseudo-headers included.
type headers map[string]string

var hopByHop = map[string]bool{
	"connection": true, "keep-alive": true, "proxy-connection": true, "transfer-encoding": true,
	"te": true, "trailer": true, "upgrade": true,
}

func fromHTTP(h http.Header, into headers) {
	for k, vs := range h {
		lk := names.lower(k)
		if hopByHop[lk] {
			continue
		}
		into[lk] = strings.Join(vs, ",")
	}
}

// toHTTP sets h's headers on out under their canonical names, replacing
// what out had for them (as http.Header.Set), but those skip names; the
// values take one allocation however many headers.
func toHTTP(h headers, out http.Header, skip func(name string) bool) {
	vals := make([]string, 0, len(h))
	for k, v := range h {
		if skip(k) {
			continue
		}
		vals = append(vals, v)
		out[names.canonical(k)] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
}

// names caches the forms of the header names the edge sees (lowercase as
// Envoy holds them, canonical as net/http does), so that converting a
// request's headers from one to the other makes no string each time.
var names headerNames

// maxHeaderNames bounds names: past it, a name is converted each time.
const maxHeaderNames = 1024

type headerNames struct {
	mu     sync.RWMutex
	lowerM map[string]string // canonical (or any) → lowercase
	canonM map[string]string // lowercase → canonical
}

func (n *headerNames) lower(k string) string {
	n.mu.RLock()
	v, ok := n.lowerM[k]
	n.mu.RUnlock()
	if ok {
		return v
	}
	v = strings.ToLower(k)
	n.remember(&n.lowerM, k, v)
	return v
}

func (n *headerNames) canonical(k string) string {
	n.mu.RLock()
	v, ok := n.canonM[k]
	n.mu.RUnlock()
	if ok {
		return v
	}
	v = http.CanonicalHeaderKey(k)
	n.remember(&n.canonM, k, v)
	return v
}

func (n *headerNames) remember(m *map[string]string, k, v string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if *m == nil {
		*m = make(map[string]string)
	}
	if len(*m) < maxHeaderNames {
		(*m)[strings.Clone(k)] = v
	}
}

// values turns the raw values of header mutations back into strings.
var values valueCache

// valueCache keeps the last string made of each of its slots' raw values:
// most values an answer sets repeat from request to request (a cluster,
// a provider's path, host and credential, a content type, a flag), and
// then cost no string each. A value that misses replaces its slot's. It
// is bounded by its slots, and by maxCachedValue the length of a value
// it keeps.
type valueCache struct {
	slots [valueSlots]atomic.Pointer[string]
}

const (
	valueSlots     = 256 // a power of two
	maxCachedValue = 256
)

var valueSeed = maphash.MakeSeed()

func (c *valueCache) str(raw []byte) string {
	if len(raw) > maxCachedValue {
		return string(raw)
	}
	slot := &c.slots[maphash.Bytes(valueSeed, raw)&(valueSlots-1)]
	if p := slot.Load(); p != nil && *p == string(raw) {
		return *p
	}
	v := string(raw)
	slot.Store(&v)
	return v
}

func (h headers) clone() headers {
	c := make(headers, len(h))
	for k, v := range h {
		c[k] = v
	}
	return c
}

// proto is the header map as Envoy sends it (raw_value, as Envoy does).
func (h headers) proto() *corev3.HeaderMap {
	hm := new(corev3.HeaderMap)
	h.protoInto(hm, nil, nil, nil)
	return hm
}

// protoInto fills hm with h: in the room given (vals, ptrs, raw: no
// allocation) when the headers fit it, else in three allocations whatever
// the number of headers, each of the size it needs: the messages live in
// one array, their pointers in another, the values in one byte buffer.
func (h headers) protoInto(hm *corev3.HeaderMap, vals []corev3.HeaderValue, ptrs []*corev3.HeaderValue, raw []byte) {
	size := 0
	for _, v := range h {
		size += len(v)
	}
	if len(h) <= len(vals) && size <= len(raw) {
		raw, vals, ptrs = raw[:0:size], vals[:len(h)], ptrs[:0:len(h)]
	} else {
		raw, vals, ptrs = make([]byte, 0, size), make([]corev3.HeaderValue, len(h)), make([]*corev3.HeaderValue, 0, len(h))
	}
	i := 0
	for k, v := range h {
		start := len(raw)
		raw = append(raw, v...)
		vals[i].Key, vals[i].RawValue = k, raw[start:len(raw):len(raw)]
		ptrs = append(ptrs, &vals[i])
		i++
	}
	hm.Headers = ptrs
}

// apply performs a header mutation with Envoy's append-action semantics.
func (h headers) apply(set []*corev3.HeaderValueOption, remove []string) {
	for _, name := range remove {
		delete(h, strings.ToLower(name))
	}
	for _, o := range set {
		k := strings.ToLower(o.GetHeader().GetKey())
		v := o.GetHeader().GetValue()
		if raw := o.GetHeader().GetRawValue(); len(raw) > 0 {
			v = values.str(raw)
		}
		old, exists := h[k]
		switch o.GetAppendAction() {
		case corev3.HeaderValueOption_APPEND_IF_EXISTS_OR_ADD:
			if exists && !strings.HasPrefix(k, ":") {
				h[k] = old + "," + v
			} else {
				h[k] = v
			}
		case corev3.HeaderValueOption_ADD_IF_ABSENT:
			if !exists {
				h[k] = v
			}
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD:
			h[k] = v
		case corev3.HeaderValueOption_OVERWRITE_IF_EXISTS:
			if exists {
				h[k] = v
			}
		}
	}
}

// headersMessage is the ext_proc message of a request's headers or
// (response) a response's, in one allocation with its headers when they
// fit a message's room (a few headers, or as many as an SDK's request or
// a provider's answer has), in four when they do not.
func headersMessage(h headers, response, end bool) *extprocv3.ProcessingRequest {
	size := 0
	for _, v := range h {
		size += len(v)
	}
	var m *headersMsg
	switch {
	case len(h) <= fewHeaders && size <= fewHeaderBytes:
		r := new(headersMsgFew)
		m = &r.headersMsg
		h.protoInto(&m.hm, r.vals[:], r.ptrs[:], r.raw[:])
	case len(h) <= manyHeaders && size <= manyHeaderBytes:
		r := new(headersMsgMany)
		m = &r.headersMsg
		h.protoInto(&m.hm, r.vals[:], r.ptrs[:], r.raw[:])
	default:
		m = new(headersMsg)
		h.protoInto(&m.hm, nil, nil, nil)
	}
	m.hh.Headers, m.hh.EndOfStream = &m.hm, end
	if response {
		m.res.ResponseHeaders = &m.hh
		m.req.Request = &m.res
	} else {
		m.reqH.RequestHeaders = &m.hh
		m.req.Request = &m.reqH
	}
	return &m.req
}

type headersMsg struct {
	req  extprocv3.ProcessingRequest
	reqH extprocv3.ProcessingRequest_RequestHeaders
	res  extprocv3.ProcessingRequest_ResponseHeaders
	hh   extprocv3.HttpHeaders
	hm   corev3.HeaderMap
}

// The rooms of a headers message: a few headers (a test's, an edge's own
// reply's), or as many as an SDK's request or a provider's answer has.
const (
	fewHeaders, fewHeaderBytes   = 8, 256
	manyHeaders, manyHeaderBytes = 20, 1024
)

type headersMsgFew struct {
	headersMsg
	vals [fewHeaders]corev3.HeaderValue
	ptrs [fewHeaders]*corev3.HeaderValue
	raw  [fewHeaderBytes]byte
}

type headersMsgMany struct {
	headersMsg
	vals [manyHeaders]corev3.HeaderValue
	ptrs [manyHeaders]*corev3.HeaderValue
	raw  [manyHeaderBytes]byte
}

// bodyMessage is the ext_proc message of a piece of a request's body or
// (response) a response's, in one allocation.
func bodyMessage(body []byte, response, end bool) *extprocv3.ProcessingRequest {
	m := new(bodyMsg)
	m.hb.Body, m.hb.EndOfStream = body, end
	if response {
		m.res.ResponseBody = &m.hb
		m.req.Request = &m.res
	} else {
		m.reqB.RequestBody = &m.hb
		m.req.Request = &m.reqB
	}
	return &m.req
}

type bodyMsg struct {
	req  extprocv3.ProcessingRequest
	reqB extprocv3.ProcessingRequest_RequestBody
	res  extprocv3.ProcessingRequest_ResponseBody
	hb   extprocv3.HttpBody
}

func exchange(s extprocv3.ExternalProcessor_ProcessClient, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if err := s.Send(req); err != nil {
		return nil, err
	}
	return s.Recv()
}

func applyCommon(h headers, c *extprocv3.CommonResponse) {
	if m := c.GetHeaderMutation(); m != nil {
		h.apply(m.GetSetHeaders(), m.GetRemoveHeaders())
	}
}

func mutateBody(body []byte, m *extprocv3.BodyMutation) []byte {
	switch v := m.GetMutation().(type) {
	case *extprocv3.BodyMutation_Body:
		return v.Body
	case *extprocv3.BodyMutation_ClearBody:
		if v.ClearBody {
			return nil
		}
	}
	return body
}

func immediateResponse(imm *extprocv3.ImmediateResponse) *response {
	h := headers{}
	h.apply(imm.GetHeaders().GetSetHeaders(), imm.GetHeaders().GetRemoveHeaders())
	st := int(imm.GetStatus().GetCode())
	if st == 0 {
		st = http.StatusOK
	}
	body := imm.GetBody()
	if body == nil {
		body = []byte{}
	}
	return &response{status: st, headers: h, body: body}
}

func localReply(status int, text string) *response {
	return &response{status: status, headers: headers{"content-type": "text/plain"}, body: []byte(text)}
}

// errorResponse is the edge's own error reply, in the given shape.
func errorResponse(e oaierror.Error, shape oaierror.Shape) *response {
	return &response{status: e.Status, headers: headers{"content-type": "application/json"}, body: e.BodyFor(shape)}
}

func (e *Edge) internal(ctx context.Context, what string, err error) *response {
	e.opt.Logger.ErrorContext(ctx, "edge: "+what, "err", err, "request_id", requestIDOf(ctx))
	return errorResponse(oaierror.Internal.ForRequest(requestIDOf(ctx)), shapeOf(ctx))
}

func writeError(w http.ResponseWriter, e oaierror.Error, shape oaierror.Shape, extra headers) {
	r := errorResponse(e, shape)
	for k, v := range extra {
		r.headers[k] = v
	}
	writeResponse(w, *r)
}

func writeHeaders(w http.ResponseWriter, status int, h headers) {
	toHTTP(h, w.Header(), func(k string) bool {
		return strings.HasPrefix(k, ":") || hopByHop[k] || k == contract.HeaderTranslated
	})
	w.WriteHeader(status)
}

// wholeWriteTimeout bounds the writing of a whole (not streamed) reply to
// the client: up to maxWholeBody, so a client must take at least half a
// MiB a second of the largest.
const wholeWriteTimeout = time.Minute

func writeResponse(w http.ResponseWriter, r response) {
	// A client that does not read cannot hold the connection: the write
	// (and net/http's flush after the handler) fails at the deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wholeWriteTimeout))
	if r.headers == nil {
		r.headers = headers{}
	}
	r.headers["content-length"] = strconv.Itoa(len(r.body))
	writeHeaders(w, r.status, r.headers)
	_, _ = w.Write(r.body)
}
