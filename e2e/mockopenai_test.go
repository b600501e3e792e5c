package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// mockOpenAI is an OpenAI-compatible provider that answers with fixed text
// and usage, and keeps what it received.
type mockOpenAI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []receivedRequest
	// words are streamed one per chunk; the non-streamed answer joins them.
	words            []string
	promptTokens     int
	completionTokens int
	// status, when set, is returned with an error body instead of an answer.
	status int
	// hold, when set, is closed by the test to let a stream finish; left,
	// when set, is closed when a held stream's request is cancelled (the
	// client went away and the proxy let go of the provider).
	hold, left chan struct{}
}

type receivedRequest struct {
	Path   string
	Auth   string
	Header http.Header
	Body   map[string]any
}

func newMockOpenAI(t *testing.T) *mockOpenAI {
	m := &mockOpenAI{words: []string{"Hello", " from", " the", " mock", "."}, promptTokens: 9, completionTokens: 5}
	m.Server = httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(m.Close)
	return m
}

func (m *mockOpenAI) received() []receivedRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]receivedRequest(nil), m.requests...)
}

func (m *mockOpenAI) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	m.mu.Lock()
	m.requests = append(m.requests, receivedRequest{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Header: r.Header.Clone(), Body: body})
	status := m.status
	m.mu.Unlock()
	if r.URL.Path != "/v1/chat/completions" {
		http.Error(w, `{"error":{"message":"not found","type":"invalid_request_error"}}`, http.StatusNotFound)
		return
	}
	if status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"error":{"message":"mock failure %d","type":"server_error","param":null,"code":null}}`, status)
		return
	}
	model, _ := body["model"].(string)
	if stream, _ := body["stream"].(bool); stream {
		m.stream(r.Context(), w, model, body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"chatcmpl-mock","object":"chat.completion","created":%d,"model":%q,`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null},"logprobs":null,"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
		time.Now().Unix(), model, strings.Join(m.words, ""), m.promptTokens, m.completionTokens, m.promptTokens+m.completionTokens)
}

func (m *mockOpenAI) stream(ctx context.Context, w http.ResponseWriter, model string, body map[string]any) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher := w.(http.Flusher)
	includeUsage := false
	if so, ok := body["stream_options"].(map[string]any); ok {
		includeUsage, _ = so["include_usage"].(bool)
	}
	usageField := ""
	if includeUsage {
		usageField = `,"usage":null`
	}
	created := time.Now().Unix()
	send := func(data string) {
		event := "data: " + data + "\n\n"
		// Split every event in two writes, so that events arrive cut at
		// arbitrary places.
		half := len(event) / 2
		fmt.Fprint(w, event[:half])
		flusher.Flush()
		fmt.Fprint(w, event[half:])
		flusher.Flush()
	}
	chunk := func(delta, finish string) string {
		f := "null"
		if finish != "" {
			f = `"` + finish + `"`
		}
		return fmt.Sprintf(`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":%d,"model":%q,"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]%s}`,
			created, model, delta, f, usageField)
	}
	send(chunk(`{"role":"assistant","content":""}`, ""))
	for i, word := range m.words {
		send(chunk(fmt.Sprintf(`{"content":%q}`, word), ""))
		if i == 1 && m.hold != nil {
			select {
			case <-m.hold:
			case <-ctx.Done():
				if m.left != nil {
					close(m.left)
				}
				return
			}
		}
	}
	send(chunk(`{}`, "stop"))
	if includeUsage {
		send(fmt.Sprintf(`{"id":"chatcmpl-mock","object":"chat.completion.chunk","created":%d,"model":%q,"choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`,
			created, model, m.promptTokens, m.completionTokens, m.promptTokens+m.completionTokens))
	}
	send("[DONE]")
}
