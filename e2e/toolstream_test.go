package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	goopenai "github.com/sashabaranov/go-openai"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

const toolStreamBody = `{"model":%q,"stream":true,"messages":[{"role":"user","content":"Weather and time in Paris?"}],
"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
{"type":"function","function":{"name":"get_time"}}]}`

// TestStreamedToolCallsHaveOpenAIsChunkShapesOnEveryProvider checks the
// bytes every provider's streamed tool calls become against OpenAI's
// documented chunk shapes: a call's first delta carries its index, id,
// type "function" and name; every later delta only its index and an
// arguments fragment (a string); several calls per answer, each with its
// own index. Then go-openai's stream reader, assembled by index as its
// users do, gets the same calls.
func TestStreamedToolCallsHaveOpenAIsChunkShapesOnEveryProvider(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			secret := tg.newAccount(t, k.kind+"-toolstream@example.com", "10")
			resp, body := tg.post(t, secret, strings.Replace(toolStreamBody, "%q", `"`+k.model+`"`, 1))
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
			type call struct{ id, name, args string }
			var calls []call
			finish := ""
			for _, line := range strings.Split(string(body), "\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				if f := gjson.Get(data, "choices.0.finish_reason"); f.Type == gjson.String {
					finish = f.Str
				}
				for _, d := range gjson.Get(data, "choices.0.delta.tool_calls").Array() {
					i := int(d.Get("index").Int())
					require.True(t, d.Get("index").Exists(), "every delta names its call's index: %s", d.Raw)
					args := d.Get("function.arguments")
					if args.Exists() {
						require.Equal(t, gjson.String, args.Type, "arguments are a string fragment: %s", d.Raw)
					}
					if i == len(calls) {
						// The call's first delta.
						assert.NotEmpty(t, d.Get("id").String(), "first delta has the id: %s", d.Raw)
						assert.Equal(t, "function", d.Get("type").String(), "first delta has the type: %s", d.Raw)
						assert.NotEmpty(t, d.Get("function.name").String(), "first delta has the name: %s", d.Raw)
						calls = append(calls, call{id: d.Get("id").String(), name: d.Get("function.name").String(), args: args.String()})
						continue
					}
					require.Less(t, i, len(calls), "calls are numbered in order: %s", d.Raw)
					assert.False(t, d.Get("id").Exists(), "a later delta has no id: %s", d.Raw)
					assert.False(t, d.Get("type").Exists(), "a later delta has no type: %s", d.Raw)
					assert.False(t, d.Get("function.name").Exists(), "a later delta has no name: %s", d.Raw)
					calls[i].args += args.String()
				}
			}
			require.Len(t, calls, len(mockToolCalls), "%s", body)
			for i, c := range mockToolCalls {
				assert.Equal(t, c.name, calls[i].name)
				assert.JSONEq(t, strings.Join(c.args, ""), calls[i].args)
			}
			assert.NotEqual(t, calls[0].id, calls[1].id, "distinct ids")
			assert.Equal(t, "tool_calls", finish)

			// go-openai, as its users assemble streamed calls.
			cfg := goopenai.DefaultConfig(secret)
			cfg.BaseURL = tg.BaseURL
			client := goopenai.NewClientWithConfig(cfg)
			stream, err := client.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{
				Model:    k.model,
				Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "Weather and time in Paris?"}},
				Tools: []goopenai.Tool{
					{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "get_weather",
						Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}}},
					{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "get_time",
						Parameters: map[string]any{"type": "object", "properties": map[string]any{}}}},
				},
			})
			require.NoError(t, err)
			defer stream.Close()
			var got []goopenai.ToolCall
			for {
				r, err := stream.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err)
				for _, d := range r.Choices[0].Delta.ToolCalls {
					require.NotNil(t, d.Index)
					for *d.Index >= len(got) {
						got = append(got, goopenai.ToolCall{})
					}
					g := &got[*d.Index]
					if d.ID != "" {
						g.ID, g.Type, g.Function.Name = d.ID, d.Type, d.Function.Name
					}
					g.Function.Arguments += d.Function.Arguments
				}
			}
			require.Len(t, got, len(mockToolCalls))
			for i, c := range mockToolCalls {
				assert.Equal(t, calls[i].id, got[i].ID)
				assert.Equal(t, c.name, got[i].Function.Name)
				assert.JSONEq(t, strings.Join(c.args, ""), got[i].Function.Arguments)
			}
		})
	}
}
