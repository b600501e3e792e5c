package mockllm

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"strings"
	"time"
)

// Fault is how the mock misbehaves on one request.
type Fault struct {
	// Status, when not 0, is answered with the format's error body.
	Status int
	// Play is what happens to a 200 answer.
	Play Play
	// After moves where a stream's play pauses, cuts or fails (HangAfter,
	// ResetAfter, Cut, ErrorEvent): after this many of its events,
	// instead of after its first pieces (kept when After is not more than
	// their events; at most all but the stream's last event).
	After int
}

// Play is how an answer is delivered.
type Play string

// The plays. The "first pieces" of a stream are its events up to and
// including the answer's second piece of text (or of tool-call arguments).
const (
	// Whole is the answer as it should be.
	Whole Play = ""
	// HangHeaders accepts the request and never answers.
	HangHeaders Play = "hang-headers"
	// HangAfter streams the first pieces, then waits: until
	// Options.Release closes (the stream then runs to its end), the
	// client goes, or the mock closes.
	HangAfter Play = "hang-after"
	// ResetAfter streams the first pieces, then cuts the connection.
	ResetAfter Play = "reset-after"
	// Cut streams the first pieces, then ends cleanly without the
	// stream's terminal event.
	Cut Play = "cut"
	// Trickle sends the whole stream one byte at a time, Options.Gap
	// apart (20ms when zero).
	Trickle Play = "trickle"
	// Malformed sends a body (or, streamed, an event after the first)
	// that is not JSON.
	Malformed Play = "malformed"
	// ErrorEvent streams the first pieces, then the format's error event.
	ErrorEvent Play = "error-event"
)

// stream is an answer's events, encoded, and where its first pieces end.
type stream struct {
	format Format
	events []string
	// first is how many events make the first pieces.
	first int
}

// sse encodes one event: an optional name, and data (text, or a value
// encoded as JSON). Gemini ends lines with CRLF.
func sse(f Format, name string, data any) string {
	eol := "\n"
	if f == Gemini {
		eol = "\r\n"
	}
	text, ok := data.(string)
	if !ok {
		text = string(mustJSON(data))
	}
	ev := ""
	if name != "" {
		ev = "event: " + name + eol
	}
	return ev + "data: " + text + eol + eol
}

// play writes a stream as the play says.
func (m *Mock) play(w http.ResponseWriter, r *http.Request, s stream, f Fault) {
	p := f.Play
	if f.After > s.first {
		s.first = min(f.After, len(s.events)-1)
	}
	contentType := "text/event-stream"
	if s.format == Bedrock {
		contentType = bedrockStreamType
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	out := &eventWriter{w: w, ctx: r.Context(), gap: m.opt.Gap, split: m.opt.Split}
	if m.opt.Odd {
		out.raw(oddStart(s.format))
	}
	switch p {
	case Trickle:
		out.trickle(strings.Join(s.events, ""), m.gapOr(20*time.Millisecond), m.done)
		return
	case Malformed:
		out.raw(s.events[0] + "data: {\"choices\": [\n\n")
		return
	case HangAfter, ResetAfter, Cut, ErrorEvent:
		if !out.events(s.events[:s.first]) {
			return
		}
	default:
		out.events(s.events)
		return
	}
	switch p {
	case ResetAfter:
		panic(http.ErrAbortHandler) // the server cuts the connection mid-body
	case ErrorEvent:
		out.raw(errorEvent(s.format))
	case HangAfter:
		select {
		case <-m.opt.Release:
			out.events(s.events[s.first:])
		case <-r.Context().Done():
			if m.opt.Left != nil {
				m.opt.Left()
			}
		case <-m.done:
		}
	}
}

func (m *Mock) gapOr(d time.Duration) time.Duration {
	if m.opt.Gap > 0 {
		return m.opt.Gap
	}
	return d
}

// errorEvent is the format's error event mid-stream.
func errorEvent(f Format) string {
	if f == Anthropic {
		return sse(f, "error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)
	}
	if f == Gemini {
		return sse(f, "", `{"error": {"code": 503, "message": "Overloaded.", "status": "UNAVAILABLE"}}`)
	}
	if f == Bedrock {
		return bedrockFrame("exception", "throttlingException", map[string]any{"message": "Too many tokens, please wait before trying again."})
	}
	return sse(f, "", `{"error":{"message":"Overloaded.","type":"server_error","param":null,"code":null}}`) + sse(f, "", "[DONE]")
}

// oddStart is odd but legal events of the format, ahead of a stream:
// {"usage":null}, a comment, {} and a usage-only event (once, a comment
// after {"usage":null} brought Tollgate down).
func oddStart(f Format) string {
	if f == Bedrock {
		return "" // an event stream has no comments or odd events
	}
	usageOnly := map[Format]string{
		OpenAI:    `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`,
		Azure:     `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":0,"total_tokens":1}}`,
		Anthropic: `{"type":"message_delta","delta":{},"usage":{"output_tokens":0}}`,
		Gemini:    `{"usageMetadata":{"promptTokenCount":1}}`,
	}[f]
	return "data: {\"usage\":null}\n\n: keep-alive\n\ndata: {}\n\ndata: " + usageOnly + "\n\n"
}

// eventWriter writes a stream's events, flushed, Options.Gap apart (each
// in two writes with Options.Split).
type eventWriter struct {
	w     http.ResponseWriter
	ctx   context.Context
	gap   time.Duration
	split bool
}

// events writes the events and reports whether the client is still there.
func (e *eventWriter) events(evs []string) bool {
	for i, ev := range evs {
		if i > 0 && e.gap > 0 && !e.wait(e.gap, nil) {
			return false
		}
		half := 0
		if e.split {
			half = len(ev) / 2
		}
		if (half > 0 && !e.raw(ev[:half])) || !e.raw(ev[half:]) {
			return false
		}
	}
	return true
}

// raw writes and flushes s, and reports whether it was written.
func (e *eventWriter) raw(s string) bool {
	if _, err := io.WriteString(e.w, s); err != nil {
		return false
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	return true
}

func (e *eventWriter) trickle(all string, gap time.Duration, done <-chan struct{}) {
	for i := range len(all) {
		if !e.raw(all[i:i+1]) || !e.wait(gap, done) {
			return
		}
	}
}

// wait waits d and reports whether the client is still there (and the
// mock open).
func (e *eventWriter) wait(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-e.ctx.Done():
		return false
	case <-done:
		return false
	}
}

// wrap compresses answers when asked (Options.Gzip) and the client accepts
// gzip; the returned writer, when an io.Closer, must be closed.
func (m *Mock) wrap(w http.ResponseWriter, r *http.Request) http.ResponseWriter {
	if !m.opt.Gzip || !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		return w
	}
	w.Header().Set("Content-Encoding", "gzip")
	return &gzipWriter{ResponseWriter: w, z: gzip.NewWriter(w)}
}

// gzipWriter compresses what is written, flushing through.
type gzipWriter struct {
	http.ResponseWriter
	z *gzip.Writer
}

func (g *gzipWriter) Write(p []byte) (int, error) { return g.z.Write(p) }

func (g *gzipWriter) Close() error { return g.z.Close() }

func (g *gzipWriter) Flush() {
	_ = g.z.Flush()
	if f, ok := g.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
