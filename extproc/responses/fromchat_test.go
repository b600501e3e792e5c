package responses

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// TestFromChatStepsTranslateTheirPart covers the shapes
// TestAChatRequestBecomesTheResponsesRequestItStandsFor does not: a string
// tool_choice, json_object output, no tools or format, and a user message
// whose parts include one Responses has no place for.
func TestFromChatStepsTranslateTheirPart(t *testing.T) {
	out, err := FromChat([]byte(`{"tool_choice":"auto","response_format":{"type":"json_object"},
		"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"input_audio"},{"type":"image_url","image_url":{"url":"u","detail":"high"}}]}]}`), "m")
	require.NoError(t, err)
	r := gjson.ParseBytes(out)
	assert.Equal(t, "auto", r.Get("tool_choice").String())
	assert.JSONEq(t, `{"format":{"type":"json_object"}}`, r.Get("text").Raw)
	assert.JSONEq(t, `[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u","detail":"high"}]}]`,
		r.Get("input").Raw, "a part of no Responses type is dropped")
	assert.False(t, r.Get("tools").Exists())
	assert.False(t, r.Get("stream").Exists())

	out, err = FromChat([]byte(`{"response_format":{"type":"text"},"messages":[{"role":"assistant","content":[{"type":"text","text":"x"},{"type":"text","text":"y"}]}]}`), "m")
	require.NoError(t, err)
	r = gjson.ParseBytes(out)
	assert.False(t, r.Get("text").Exists(), "plain text asks for no format")
	assert.JSONEq(t, `[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"xy"}]}]`, r.Get("input").Raw)
}
