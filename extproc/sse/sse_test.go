package sse

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type got struct{ Name, Data, Raw string }

func collect(p *Parser, out *[]got) {
	for {
		ev, ok := p.Next()
		if !ok {
			return
		}
		*out = append(*out, got{string(ev.Name), string(ev.Data), string(ev.Raw)})
	}
}

func parseAll(pieces ...string) []got {
	var p Parser
	var out []got
	for _, piece := range pieces {
		// Hand the parser a fresh buffer and scribble over it afterwards, as
		// a gRPC stream would reuse memory: the parser must have copied
		// whatever it keeps.
		b := []byte(piece)
		p.Feed(b)
		collect(&p, &out)
		for i := range b {
			b[i] = '#'
		}
	}
	if ev, ok := p.Finish(); ok {
		out = append(out, got{string(ev.Name), string(ev.Data), string(ev.Raw)})
	}
	return out
}

func TestParsesEventsWithEveryLineEnding(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []got
	}{
		{"LF", "data: a\n\ndata: b\n\n", []got{{"", "a", "data: a\n\n"}, {"", "b", "data: b\n\n"}}},
		{"CRLF", "data: a\r\n\r\nevent: x\r\ndata: b\r\n\r\n", []got{{"", "a", "data: a\r\n\r\n"}, {"x", "b", "event: x\r\ndata: b\r\n\r\n"}}},
		{"CR", "data: a\r\rdata: b\r\r", []got{{"", "a", "data: a\r\r"}, {"", "b", "data: b\r\r"}}},
		{"multi-line data", "data: a\ndata: b\ndata:c\n\n", []got{{"", "a\nb\nc", "data: a\ndata: b\ndata:c\n\n"}}},
		{"comments and unknown fields", ": ping\nid: 7\ndata: x\n\n", []got{{"", "x", ": ping\nid: 7\ndata: x\n\n"}}},
		{"missing final blank line", "data: a\n\ndata: [DONE]", []got{{"", "a", "data: a\n\n"}, {"", "[DONE]", "data: [DONE]"}}},
		{"leading blank lines", "\n\ndata: a\n\n", []got{{"", "a", "\n\ndata: a\n\n"}}},
		{"field without colon", "data\n\n", []got{{"", "", "data\n\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, parseAll(tt.in))
		})
	}
}

// A recorded OpenAI stream with include_usage, split at every byte offset
// into two pieces and at every offset into single bytes thereafter, must
// give the same events as the whole.
func TestEverySplitPointGivesTheSameEvents(t *testing.T) {
	streams := map[string]string{
		"openai": `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Héllo"},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}

data: [DONE]

`,
		"crlf named events": "event: message_start\r\ndata: {\"a\":1}\r\n\r\nevent: ping\r\ndata: {}\r\n\r\n:comment\r\n\r\nevent: message_stop\r\ndata: {\"b\":2}\r\n\r\n",
	}
	for name, stream := range streams {
		t.Run(name, func(t *testing.T) {
			want := parseAll(stream)
			require.NotEmpty(t, want)
			var joined strings.Builder
			for _, ev := range want {
				joined.WriteString(ev.Raw)
			}
			assert.Equal(t, stream, joined.String(), "Raw must cover the stream exactly")
			for i := 0; i <= len(stream); i++ {
				assert.Equal(t, want, parseAll(stream[:i], stream[i:]), "split at %d", i)
			}
			bytewise := make([]string, len(stream))
			for i := 0; i < len(stream); i++ {
				bytewise[i] = stream[i : i+1]
			}
			assert.Equal(t, want, parseAll(bytewise...))
		})
	}
}

func TestPendingCountsTheUnfinishedEvent(t *testing.T) {
	var p Parser
	p.Feed([]byte("data: a\n\ndata: b"))
	_, ok := p.Next()
	require.True(t, ok)
	_, ok = p.Next()
	require.False(t, ok)
	assert.Equal(t, len("data: b"), p.Pending())
}

func FuzzParserNeverPanicsAndSplitsAgree(f *testing.F) {
	f.Add("data: a\n\ndata: b\r\n\r\n", 3)
	f.Add("event: x\rdata: y\r\r", 1)
	f.Add(": c\n\n\n\ndata", 0)
	f.Fuzz(func(t *testing.T, s string, at int) {
		if at < 0 {
			at = -at
		}
		at %= len(s) + 1
		whole := parseAll(s)
		split := parseAll(s[:at], s[at:])
		// Splitting may only differ where a lone CR at the split point was
		// ambiguous; compare the raw bytes covered, which must be equal.
		var a, b strings.Builder
		for _, e := range whole {
			a.WriteString(e.Raw)
		}
		for _, e := range split {
			b.WriteString(e.Raw)
		}
		if strings.TrimRight(a.String(), "\r\n") != strings.TrimRight(b.String(), "\r\n") {
			t.Fatalf("raw differs: %q vs %q", a.String(), b.String())
		}
	})
}

// A buffer grown for a burst of events that came after an unfinished one
// is let go once the burst is read and little is left: a stream waiting
// for its next piece holds no large buffer.
func TestTheBufferOfABurstIsNotKept(t *testing.T) {
	var p Parser
	p.Feed([]byte("data: fir"))
	_, ok := p.Next()
	require.False(t, ok, "an unfinished event waits")
	burst := "st\n\n" + strings.Repeat("data: "+strings.Repeat("x", 200)+"\n\n", 100) + "data: ha"
	p.Feed([]byte(burst))
	n := 0
	for {
		if _, ok := p.Next(); !ok {
			break
		}
		n++
	}
	assert.Equal(t, 101, n)
	assert.Equal(t, len("data: ha"), p.Pending())
	assert.LessOrEqual(t, cap(p.buf), keptBuffer, "the burst's buffer is gone")
	p.Feed([]byte("lf\n\n"))
	ev, ok := p.Next()
	require.True(t, ok)
	assert.Equal(t, "half", string(ev.Data), "what was left of it is whole")
}
