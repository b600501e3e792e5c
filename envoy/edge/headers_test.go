package edge

import (
	"testing"

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
