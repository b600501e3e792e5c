package provider

import (
	"math/rand/v2"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// FuzzAppendJSONStringMatchesEncodingJSON: the hand-written string encoder
// of the stream hot path writes what encoding/json (HTML escaping off)
// writes, for any bytes.
func FuzzAppendJSONStringMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "hello", `quote " and \ back`, "\b\f\n\r\t\x00\x1f\x7f", "<&>", "é ✓ 😀", "\u2028\u2029", "bad \xff\xfe utf8", "\xe2\x82"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := marshalJSON(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString(nil, s)))
	})
}

func TestAppendJSONStringOnRandomBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		b := make([]byte, r.IntN(24))
		for i := range b {
			switch r.IntN(4) {
			case 0:
				b[i] = byte(r.IntN(0x20))
			case 1:
				b[i] = byte(0x80 + r.IntN(0x80))
			default:
				b[i] = byte(0x20 + r.IntN(0x60))
			}
		}
		s := string(b)
		if r.IntN(8) == 0 {
			s += string([]rune{0x2028, 0x2029, utf8.RuneError}[r.IntN(3)])
		}
		want, err := marshalJSON(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(appendJSONString(nil, s)), "%q", s)
	}
}

// TestChunkMatchesEncodingJSON: the hand-written chunk is byte for byte the
// streamChunk encoding/json would write, for every shape of delta.
func TestChunkMatchesEncodingJSON(t *testing.T) {
	text, empty := "hi \"there\"\n", ""
	deltas := []streamDelta{
		{Role: "assistant", Content: &empty},
		{Content: &text},
		{},
		{ToolCalls: []streamToolCall{{Index: 0, ID: "call_1", Type: "function", Function: streamFunction{Name: "get_weather", Arguments: ""}}}},
		{ToolCalls: []streamToolCall{{Index: 1, Function: streamFunction{Arguments: `{"city":"Paris"}`}}}},
		{Role: "assistant", Content: &text, ToolCalls: []streamToolCall{{Index: 0, ID: "x"}, {Index: 1, Type: "function"}}},
	}
	for _, usage := range []bool{false, true} {
		for _, finish := range []string{"", "stop", "tool_calls"} {
			for _, d := range deltas {
				s := &streamState{id: "chatcmpl-1", created: 1750000000, model: "m\u2028", clientUsage: usage}
				c := streamChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model, Choices: []streamChoice{{Delta: d}}}
				if finish != "" {
					f := finish
					c.Choices[0].FinishReason = &f
				}
				if usage {
					c.Usage = nullJSON{}
				}
				require.Equal(t, string(appendEvent(nil, c)), string(s.chunk(nil, d, finish)))
			}
		}
	}
}
