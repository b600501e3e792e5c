package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Faults a faultProvider can play, as real providers misbehave.
const (
	faultNone        = "ok"           // a whole answer
	faultHangHeaders = "hang-headers" // accepts the request, never answers
	faultHangAfter   = "hang-after"   // two chunks, then silence
	faultResetAfter  = "reset-after"  // two chunks, then the connection is cut
	faultCut         = "cut"          // two chunks, then a clean end without [DONE]
	faultTrickle     = "trickle"      // the whole answer, one byte every 20 ms
	fault500         = "500"          // an OpenAI-shaped 500
	faultMalformed   = "malformed"    // an event (or a body) that is not JSON
	faultErrorEvent  = "error-event"  // a chunk, then the provider's error event
)

// faultProvider is an OpenAI-type provider whose every answer plays the
// fault its pick function chooses. Hung answers end when the client goes or
// the test ends. It counts the requests it received and reports each
// request's arrival on arrived (when not nil, without blocking).
type faultProvider struct {
	*httptest.Server
	pick    func() string
	arrived chan string

	mu    sync.Mutex
	count int
	done  chan struct{}
}

// faultText is the answer's text: two chunks' worth.
var faultText = []string{"Hello", " there"}

func newFaultProvider(t *testing.T, pick func() string) *faultProvider {
	t.Helper()
	f := &faultProvider{pick: pick, done: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		close(f.done) // hung handlers return
		f.Server.CloseClientConnections()
		f.Server.Close()
	})
	return f
}

func (f *faultProvider) requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

func (f *faultProvider) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-f.done:
	}
}

func (f *faultProvider) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.count++
	f.mu.Unlock()
	var body struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	fault := f.pick()
	if f.arrived != nil {
		select {
		case f.arrived <- fault:
		default:
		}
	}
	switch fault {
	case faultHangHeaders:
		f.hang(r)
		return
	case fault500:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, `{"error":{"message":"The server had an error.","type":"server_error","param":null,"code":null}}`)
		return
	}
	if !body.Stream {
		w.Header().Set("Content-Type", "application/json")
		if fault == faultMalformed {
			fmt.Fprint(w, `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,`)
			return
		}
		writeJSON(w, map[string]any{
			"id": "chatcmpl-fault", "object": "chat.completion", "created": 1700000000, "model": body.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": strings.Join(faultText, ""), "refusal": nil}}},
			"usage": map[string]any{"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any) string {
		b, _ := json.Marshal(map[string]any{
			"id": "chatcmpl-fault", "object": "chat.completion.chunk", "created": 1700000000, "model": body.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
		})
		return "data: " + string(b) + "\n\n"
	}
	var events []string
	events = append(events, chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for _, s := range faultText {
		events = append(events, chunk(map[string]any{"content": s}, nil))
	}
	switch fault {
	case faultHangAfter, faultResetAfter, faultCut:
		for _, ev := range events {
			fmt.Fprint(w, ev)
		}
		flusher.Flush()
		switch fault {
		case faultHangAfter:
			f.hang(r)
		case faultResetAfter:
			panic(http.ErrAbortHandler) // the server cuts the connection mid-body
		}
		return
	case faultMalformed:
		fmt.Fprint(w, events[0]+"data: {\"choices\": [\n\n")
		flusher.Flush()
		return
	case faultErrorEvent:
		fmt.Fprint(w, events[0]+events[1]+`data: {"error":{"message":"Overloaded.","type":"server_error","param":null,"code":null}}`+"\n\ndata: [DONE]\n\n")
		flusher.Flush()
		return
	}
	events = append(events, chunk(map[string]any{}, "stop"))
	u, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-fault", "object": "chat.completion.chunk", "created": 1700000000, "model": body.Model,
		"choices": []any{}, "usage": map[string]any{"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
	})
	events = append(events, "data: "+string(u)+"\n\n", "data: [DONE]\n\n")
	all := strings.Join(events, "")
	if fault == faultTrickle {
		for i := range len(all) {
			if _, err := fmt.Fprint(w, all[i:i+1]); err != nil {
				return
			}
			flusher.Flush()
			select {
			case <-time.After(20 * time.Millisecond):
			case <-r.Context().Done():
				return
			case <-f.done:
				return
			}
		}
		return
	}
	fmt.Fprint(w, all)
	flusher.Flush()
}

// faultTimeouts are short per-attempt timeouts for the fault tests.
const faultTimeouts = "connect_timeout: 1s, first_byte_timeout: 400ms, stream_idle_timeout: 400ms"

// faultConfig serves model "m" from the given providers in priority order
// (OpenAI-type, named p0, p1, …) with faultTimeouts and the model's
// request timeout, at $0.15/$0.60 per million tokens (free when free), and
// a plan with every model.
func faultConfig(requestTimeout string, free bool, urls ...string) string {
	var providers, deps strings.Builder
	for i, u := range urls {
		fmt.Fprintf(&providers, "  - {name: p%d, type: openai, base_url: \"%s/v1\", api_key: sk-openai-secret, %s}\n", i, u, faultTimeouts)
		fmt.Fprintf(&deps, "      - {provider: p%d, model: upstream-model, priority: %d}\n", i, i)
	}
	prices := "    input_price_per_million: 0.15\n    output_price_per_million: 0.60\n"
	if free {
		prices = ""
	}
	return "key_prefix: tg\nproviders:\n" + providers.String() +
		"models:\n  - id: m\n    max_tokens: 8192\n" + prices + "    request_timeout: " + requestTimeout + "\n    deployments:\n" + deps.String() +
		"plans:\n  - {name: pro, default_rpm: 0, models: [\"*\"]}\n"
}
