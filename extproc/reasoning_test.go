package extproc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
)

// deepseekDeployment is model ds's deployment on the deepseek profile.
var deepseekDeployment = config.DeploymentID("ds", "deepseek", "deepseek-reasoner")

// deepseekRig is a rig whose configuration adds a deepseek provider and
// its model ds (deepseek-reasoner).
func deepseekRig(t *testing.T) *rig {
	return rigAdding(t, `  - {name: deepseek, type: deepseek, api_key: sk-ds}
models:
  - id: ds
    max_tokens: 100
    deployments: [{provider: deepseek, model: deepseek-reasoner}]
`)
}

// TestAToolCallTurnsReasoningGoesBackToDeepSeekOnly: through the Responses
// API (a reasoning item) and the Messages API (a thinking block), an
// earlier tool-call turn's reasoning reaches a DeepSeek deployment as that
// assistant message's reasoning_content, which its reasoning models
// refuse the follow-up without; a plain openai deployment gets none.
func TestAToolCallTurnsReasoningGoesBackToDeepSeekOnly(t *testing.T) {
	g := deepseekRig(t)
	const responsesBody = `{"model":"%s","input":[{"role":"user","content":"Weather in Paris?"},
		{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"I should call get_weather."}]},
		{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{}"},
		{"type":"function_call_output","call_id":"c1","output":"sunny"}]}`
	const messagesBody = `{"model":"%s","max_tokens":50,"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"I should call get_weather.","signature":""},{"type":"tool_use","id":"c1","name":"get_weather","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"c1","content":"sunny"}]}]}`
	for _, tt := range []struct {
		name, path, body, model, deployment, want string
	}{
		{"responses to deepseek", contract.PathResponses, responsesBody, "ds", deepseekDeployment, "I should call get_weather."},
		{"messages to deepseek", contract.PathMessages, messagesBody, "ds", deepseekDeployment, "I should call get_weather."},
		{"responses to openai", contract.PathResponses, responsesBody, "gpt-4o-mini", gpt, ""},
		{"messages to openai", contract.PathMessages, messagesBody, "gpt-4o-mini", gpt, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := strings.Replace(tt.body, "%s", tt.model, 1)
			_, routed := g.admitted(tt.path, body)
			require.Nil(t, routed.GetImmediateResponse(), "%s", routed.GetImmediateResponse().GetBody())
			var x *Session
			var sent = routed
			if tt.path == contract.PathMessages {
				x, sent = g.messagesAttempt(routed, tt.deployment)
			} else {
				x, sent = g.attempt(routed, tt.deployment, body, 1)
			}
			defer finish(x)
			require.Nil(t, sent.GetImmediateResponse(), "%s", sent.GetImmediateResponse().GetBody())
			up := commonOf(sent).GetBodyMutation().GetBody()
			assistant := gjson.GetBytes(up, `messages.#(role=="assistant")`)
			require.True(t, assistant.Exists(), "%s", up)
			assert.Equal(t, "c1", assistant.Get("tool_calls.0.id").String(), "%s", up)
			assert.Equal(t, tt.want, assistant.Get("reasoning_content").String(), "%s", up)
			assert.Equal(t, tt.want != "", assistant.Get("reasoning_content").Exists(), "%s", up)
		})
	}
}

// TestDeepSeeksReasoningIsKeptWithPreviousResponseID: a DeepSeek answer's
// reasoning_content is the response's reasoning item, and the turn kept
// for previous_response_id carries it, so the next request's assistant
// tool-call turn has it back.
func TestDeepSeeksReasoningIsKeptWithPreviousResponseID(t *testing.T) {
	g := deepseekRig(t)
	const first = `{"model":"ds","input":"Weather in Paris?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}]}`
	router, routed := g.admitted(contract.PathResponses, first)
	x, _ := g.attempt(routed, deepseekDeployment, first, 1)
	out := g.answer(x, "200", false, `{"id":"c1","object":"chat.completion","created":1,"model":"deepseek-reasoner","choices":[{"index":0,`+
		`"message":{"role":"assistant","content":"","reasoning_content":"I should call get_weather.","tool_calls":[{"id":"call_1","type":"function",`+
		`"function":{"name":"get_weather","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`)
	finish(x)
	g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
	finish(router)
	answer := out[len(out)-1].GetResponseBody().GetResponse().GetBodyMutation().GetBody()
	assert.Equal(t, "reasoning", gjson.GetBytes(answer, "output.0.type").String(), "%s", answer)
	assert.Equal(t, "I should call get_weather.", gjson.GetBytes(answer, "output.0.content.0.text").String(), "%s", answer)

	next := `{"model":"ds","previous_response_id":"` + gjson.GetBytes(answer, "id").String() +
		`","input":[{"type":"function_call_output","call_id":"call_1","output":"sunny"}]}`
	_, routed = g.admitted(contract.PathResponses, next)
	require.Nil(t, routed.GetImmediateResponse(), "%s", routed.GetImmediateResponse().GetBody())
	x, sent := g.attempt(routed, deepseekDeployment, next, 1)
	defer finish(x)
	up := commonOf(sent).GetBodyMutation().GetBody()
	assert.Equal(t, "I should call get_weather.", gjson.GetBytes(up, `messages.#(role=="assistant").reasoning_content`).String(), "%s", up)
}
