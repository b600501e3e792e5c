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

// TestAToolCallTurnsReasoningGoesBackToDeepSeekOnly: through the Responses
// API (a reasoning item) and the Messages API (a thinking block), an
// earlier tool-call turn's reasoning reaches a DeepSeek deployment as that
// assistant message's reasoning_content, which its reasoning models
// refuse the follow-up without; a plain openai deployment gets none.
func TestAToolCallTurnsReasoningGoesBackToDeepSeekOnly(t *testing.T) {
	cfg := strings.Replace(stepConfig, "models:\n", `  - {name: deepseek, type: deepseek, api_key: sk-ds}
models:
  - id: ds
    max_tokens: 100
    deployments: [{provider: deepseek, model: deepseek-reasoner}]
`, 1)
	g := newRig(t, func(g *rig) {
		c, err := config.Parse([]byte(cfg), func(string) (string, bool) { return "", false })
		require.NoError(t, err)
		g.cfg = c
		g.opt.Config = func() *config.Config { return c }
	})
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
