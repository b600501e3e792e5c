package edge

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/stretchr/testify/assert"
)

func TestHeadersToProtoKeepsEveryNameAndValue(t *testing.T) {
	h := headers{":path": "/v1/chat/completions", ":method": "POST", "x-empty": "", "content-type": "application/json", "x-ünï": "çødé"}
	got := headers{}
	for _, v := range h.proto().GetHeaders() {
		got[v.GetKey()] = string(v.GetRawValue())
		assert.Equal(t, len(v.GetRawValue()), cap(v.GetRawValue()), "a value cannot grow into the next one")
	}
	assert.Equal(t, h, got)
}

func TestHeadersToHTTPSetEachCanonicalNameButTheSkippedOnes(t *testing.T) {
	out := http.Header{"X-Request-Id": {"old"}, "Date": {"kept"}}
	h := headers{":status": "200", "content-type": "application/json", "x-request-id": "new", "x-ratelimit-remaining-requests": "9", "connection": "close", "x-empty": ""}
	toHTTP(h, out, func(k string) bool { return k[0] == ':' || hopByHop[k] })
	assert.Equal(t, http.Header{
		"Content-Type": {"application/json"}, "X-Request-Id": {"new"}, "X-Ratelimit-Remaining-Requests": {"9"}, "X-Empty": {""}, "Date": {"kept"},
	}, out)
	// Each name's values are its own: adding to one leaves the next.
	out.Add("Content-Type", "x")
	assert.Equal(t, []string{"9"}, out["X-Ratelimit-Remaining-Requests"])
}

func TestHeadersFromHTTPAreLowercaseWithoutHopByHop(t *testing.T) {
	into := headers{}
	fromHTTP(http.Header{"Content-Type": {"a"}, "X-Two": {"1", "2"}, "Connection": {"close"}, "weird_Name": {"w"}}, into)
	assert.Equal(t, headers{"content-type": "a", "x-two": "1,2", "weird_name": "w"}, into)
}

func TestHeaderNamesAreCachedUpToTheirBound(t *testing.T) {
	var n headerNames
	assert.Equal(t, "Content-Type", n.canonical("content-type"))
	assert.Equal(t, "content-type", n.lower("Content-Type"))
	assert.Equal(t, 0.0, testing.AllocsPerRun(10, func() { _, _ = n.canonical("content-type"), n.lower("Content-Type") }))
	for i := range maxHeaderNames + 10 {
		assert.Equal(t, "X-N"+strconv.Itoa(i), n.canonical("x-n"+strconv.Itoa(i)))
	}
	assert.Len(t, n.canonM, maxHeaderNames)
	assert.Equal(t, "X-Past-The-Bound", n.canonical("x-past-the-bound"), "a name past the bound is still converted")
}

func TestMessagesCarryTheirPhaseAndEnd(t *testing.T) {
	h := headers{":path": "/v1/chat/completions"}
	for _, end := range []bool{false, true} {
		m := headersMessage(h, false, end)
		assert.Equal(t, "/v1/chat/completions", string(m.GetRequestHeaders().GetHeaders().GetHeaders()[0].GetRawValue()))
		assert.Equal(t, end, m.GetRequestHeaders().GetEndOfStream())
		assert.Nil(t, m.GetResponseHeaders())
		m = headersMessage(h, true, end)
		assert.Len(t, m.GetResponseHeaders().GetHeaders().GetHeaders(), 1)
		assert.Equal(t, end, m.GetResponseHeaders().GetEndOfStream())
		assert.Nil(t, m.GetRequestHeaders())

		b := bodyMessage([]byte("x"), false, end)
		assert.Equal(t, "x", string(b.GetRequestBody().GetBody()))
		assert.Equal(t, end, b.GetRequestBody().GetEndOfStream())
		assert.Nil(t, b.GetResponseBody())
		b = bodyMessage([]byte("y"), true, end)
		assert.Equal(t, "y", string(b.GetResponseBody().GetBody()))
		assert.Equal(t, end, b.GetResponseBody().GetEndOfStream())
		assert.Nil(t, b.GetRequestBody())
	}
	assert.Equal(t, 1.0, testing.AllocsPerRun(10, func() { _ = bodyMessage(nil, true, false) }))
}

func TestRawValuesBecomeTheSameStringsAgain(t *testing.T) {
	var c valueCache
	assert.Equal(t, "application/json", c.str([]byte("application/json")))
	assert.Equal(t, 0.0, testing.AllocsPerRun(10, func() { _ = c.str([]byte("application/json")) }),
		"a value seen before costs no string")
	// Every slot replaced many times over: each answer is still its value.
	for i := range 4 * valueSlots {
		v := "v" + strconv.Itoa(i)
		assert.Equal(t, v, c.str([]byte(v)))
	}
	raw := []byte("application/json")
	got := c.str(raw)
	raw[0] = 'X' // the bytes are the message's: the string is a copy
	assert.Equal(t, "application/json", got)
	long := strings.Repeat("x", maxCachedValue+1)
	assert.Equal(t, long, c.str([]byte(long)))
	for i := range c.slots {
		if p := c.slots[i].Load(); p != nil {
			assert.LessOrEqual(t, len(*p), maxCachedValue, "a long value is not kept")
		}
	}
}

func TestAMutationSetsTheRawValueOrTheValue(t *testing.T) {
	h := headers{"a": "old"}
	h.apply([]*corev3.HeaderValueOption{
		{Header: &corev3.HeaderValue{Key: "A", RawValue: []byte("raw")}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
		{Header: &corev3.HeaderValue{Key: "b", Value: "plain"}, AppendAction: corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD},
	}, nil)
	assert.Equal(t, headers{"a": "raw", "b": "plain"}, h)
}

func TestAHeadersMessageHoldsItsHeadersInItsRoomWhenTheyFit(t *testing.T) {
	few := headers{":path": "/v1/chat/completions", ":method": "POST", "content-type": "application/json", "x-empty": ""}
	many := headers{"authorization": strings.Repeat("k", fewHeaderBytes)}
	tooMany := headers{}
	for i := range manyHeaders + 1 {
		tooMany["x-h"+strconv.Itoa(i)] = "v"
	}
	tooLong := headers{"authorization": strings.Repeat("k", manyHeaderBytes+1)}
	for _, h := range []headers{few, many, tooMany, tooLong, {}} {
		got := headers{}
		for _, v := range headersMessage(h, false, false).GetRequestHeaders().GetHeaders().GetHeaders() {
			got[v.GetKey()] = string(v.GetRawValue())
			assert.Equal(t, len(v.GetRawValue()), cap(v.GetRawValue()), "a value cannot grow into the next one")
		}
		assert.Equal(t, h, got)
	}
	for _, c := range []struct {
		h      headers
		allocs float64
	}{{few, 1}, {many, 1}, {tooMany, 4}, {tooLong, 4}} {
		assert.Equal(t, c.allocs, testing.AllocsPerRun(10, func() { _ = headersMessage(c.h, true, false) }), "%d headers", len(c.h))
	}
}
