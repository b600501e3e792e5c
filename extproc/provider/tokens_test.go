package provider

import (
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEstimateTokensCountsWithO200k(t *testing.T) {
	tests := []struct {
		name string
		text string
		want int64
	}{
		{"empty", "", 0},
		{"one word", "hello", 1},
		{"sentence", "Hello, world!", 4},
		{"invalid UTF-8 does not fail", "caf\xc3", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, EstimateTokens(tt.text))
		})
	}
}

func TestEstimatePromptTokensAddsOpenAIOverheads(t *testing.T) {
	tests := []struct {
		name string
		body string
		want int64
	}{
		// OpenAI's cookbook: 3 per message, 1 per name, 3 to prime the
		// reply; "user" and "hello" are a token each.
		{"one message", `{"messages":[{"role":"user","content":"hello"}]}`, 3 + 1 + 1 + 3},
		{"name", `{"messages":[{"role":"user","name":"ann","content":"hello"}]}`, 3 + 1 + 1 + 1 + 1 + 3},
		{"text parts and an image", `{"messages":[{"role":"user","content":[{"type":"text","text":"hello"},{"type":"image_url","image_url":{"url":"https://x"}}]}]}`, 3 + 1 + 1 + 85 + 3},
		{"no messages", `{"messages":[]}`, 3},
		{"not a request: counted as text", `hello`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, EstimatePromptTokens(&Request{Body: []byte(tt.body)}, nil))
		})
	}
}

func TestEstimatePromptTokensCountsToolsAndCalls(t *testing.T) {
	bare := EstimatePromptTokens(&Request{Body: []byte(`{"messages":[{"role":"assistant","content":null}]}`)}, nil)
	withCall := EstimatePromptTokens(&Request{Body: []byte(`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]}]}`)}, nil)
	withTools := EstimatePromptTokens(&Request{Body: []byte(`{"messages":[{"role":"assistant","content":null}],"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now.","parameters":{"type":"object"}}}]}`)}, nil)
	assert.Greater(t, withCall, bare+5)
	assert.Greater(t, withTools, bare+5)
}

func TestLongTextsAreExtrapolatedBeyondTheExactBudget(t *testing.T) {
	unit := "The quick brown fox jumps over the lazy dog. "
	const sample = 1000
	perUnit := float64(EstimateTokens(strings.Repeat(unit, sample))) / sample // exact: within the budget
	n := 3 * exactTokenBytes / len(unit)
	got := EstimateTokens(strings.Repeat(unit, n))
	assert.InEpsilon(t, perUnit*float64(n), float64(got), 0.01, "extrapolation stays close to the exact count")
}

func TestEstimatesAreSafeConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			assert.Equal(t, int64(4), EstimateTokens("Hello, world!"))
		})
	}
	wg.Wait()
}

// An adapter and the prompt estimate of one attempt read one parse of the
// body; a new body is parsed anew.
func TestARequestBodyIsParsedOncePerBody(t *testing.T) {
	req := &Request{Body: []byte(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`)}
	first, err := parseChatRequest(req)
	require.NoError(t, err)
	again, err := req.chat()
	require.NoError(t, err)
	assert.Same(t, first, again, "the estimate reads the adapter's parse")
	assert.Equal(t, EstimatePromptTokens(&Request{Body: req.Body}, nil), EstimatePromptTokens(req, nil))

	req.Body = []byte(`{"model":"m","messages":[{"role":"user","content":"hello there"},{"role":"user","content":"and more"}]}`)
	other, err := req.chat()
	require.NoError(t, err)
	assert.NotSame(t, first, other)
	assert.Len(t, other.Messages, 2)

	req.Body = []byte(`not json`)
	_, err = req.chat()
	require.Error(t, err)
	assert.Equal(t, EstimateTokens("not json"), EstimatePromptTokens(req, nil), "not a chat request: counted as text")
}
