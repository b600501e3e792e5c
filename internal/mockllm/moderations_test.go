package mockllm

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

func TestModerationFlagsOnlyTheForbiddenWordAsViolence(t *testing.T) {
	m := New(Options{})
	for _, path := range []string{"/v1/moderations", "/openai/deployments/d/moderations?api-version=1"} {
		resp, body := post(t, m, path, `{"model":"omni-moderation-latest","input":["Weather in Paris?","This is FORBIDDEN.","forbiddenness"]}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		require.EqualValues(t, 3, gjson.Get(body, "results.#").Int(), "a result per input")
		assert.Equal(t, []bool{false, true, false}, []bool{gjson.Get(body, "results.0.flagged").Bool(),
			gjson.Get(body, "results.1.flagged").Bool(), gjson.Get(body, "results.2.flagged").Bool()}, "the word, in any case, alone")
		assert.True(t, gjson.Get(body, "results.1.categories.violence").Bool())
		assert.Greater(t, gjson.Get(body, "results.1.category_scores.violence").Float(), 0.5)
		assert.False(t, gjson.Get(body, "results.1.categories.hate").Bool())
		for _, r := range gjson.Get(body, "results").Array() {
			assert.Len(t, r.Get("categories").Map(), 13)
			assert.Len(t, r.Get("category_scores").Map(), 13)
			assert.Equal(t, `["text"]`, r.Get("category_applied_input_types.violence").Raw)
		}
		assert.False(t, gjson.Get(body, "usage").Exists(), "OpenAI reports no usage for moderations")
		assert.Equal(t, "omni-moderation-latest", gjson.Get(body, "model").String())
	}
	_, body := post(t, m, "/v1/moderations", `{"input":"forbidden"}`)
	assert.Equal(t, "omni-moderation-latest", gjson.Get(body, "model").String(), "the default model")
	assert.True(t, gjson.Get(body, "results.0.flagged").Bool())
}

func TestAMultimodalInputIsOneResultWithItsInputTypes(t *testing.T) {
	_, body := post(t, New(Options{}), "/v1/moderations", `{"model":"omni-moderation-latest","input":[`+
		`{"type":"text","text":"a forbidden thing"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}`)
	require.EqualValues(t, 1, gjson.Get(body, "results.#").Int(), body)
	assert.True(t, gjson.Get(body, "results.0.flagged").Bool())
	assert.Equal(t, `["text","image"]`, gjson.Get(body, "results.0.category_applied_input_types.violence").Raw)
	assert.Equal(t, `["text"]`, gjson.Get(body, "results.0.category_applied_input_types.hate").Raw)

	_, body = post(t, New(Options{}), "/v1/moderations", `{"input":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]}`)
	assert.Equal(t, `["image"]`, gjson.Get(body, "results.0.category_applied_input_types.sexual").Raw, body)
	assert.Equal(t, `[]`, gjson.Get(body, "results.0.category_applied_input_types.hate").Raw, "an image alone is not scored for hate")
}

func TestModerationsRefuseWhatOpenAIRefuses(t *testing.T) {
	for _, tc := range []struct{ name, body string }{
		{"no input", `{"model":"m"}`},
		{"an empty array", `{"input":[]}`},
		{"a number", `{"input":3}`},
		{"mixed", `{"input":["a",{"type":"text","text":"b"}]}`},
		{"an unknown part", `{"input":[{"type":"audio","audio":"x"}]}`},
		{"an image without url", `{"input":[{"type":"image_url","image_url":{}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, New(Options{}), "/v1/moderations", tc.body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Equal(t, "input", gjson.Get(body, "error.param").String())
		})
	}
}
