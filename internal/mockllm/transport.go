package mockllm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// Transport is an http.RoundTripper that serves every request with h, in
// process: no socket, no listener. The response's body streams what the
// handler writes, as it writes it; closing the body, or the request's
// context ending, cancels the handler's request context. A handler that
// panics with http.ErrAbortHandler cuts the body with an error, as a
// server cuts the connection.
func Transport(h http.Handler) http.RoundTripper { return transport{h} }

type transport struct{ h http.Handler }

// errAborted is the body's error when the handler aborted.
var errAborted = errors.New("mockllm: the handler aborted the response")

func (t transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	sreq := req.Clone(ctx)
	if sreq.Body == nil {
		sreq.Body = http.NoBody
	}
	sreq.RequestURI, sreq.RemoteAddr = req.URL.RequestURI(), "in-process"
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
	// Owned by the response: it ends when the handler returns, which
	// cancel (on the body's Close or the request's end) hastens, and
	// the pipe's closed reader unblocks any write.
	go t.serve(w, sreq)
	select {
	case <-w.ready:
	case <-ctx.Done():
		cancel()
		_ = pr.Close()
		return nil, fmt.Errorf("mockllm: %w", ctx.Err())
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.sent, Body: &pipeBody{PipeReader: pr, cancel: cancel}, ContentLength: -1, Request: req,
	}, nil
}

// serve runs the handler; its recover is the response's last line of
// defence, and how http.ErrAbortHandler cuts the body.
func (t transport) serve(w *pipeWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			w.WriteHeader(http.StatusInternalServerError)
			_ = w.pw.CloseWithError(fmt.Errorf("%w: %v", errAborted, v))
			return
		}
		w.WriteHeader(http.StatusOK)
		_ = w.pw.Close()
	}()
	t.h.ServeHTTP(w, r)
}

// pipeWriter is the handler's http.ResponseWriter.
type pipeWriter struct {
	header http.Header
	pw     *io.PipeWriter
	once   sync.Once
	ready  chan struct{} // closed when the status and headers are sent
	status int
	sent   http.Header
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(status int) {
	w.once.Do(func() {
		w.status, w.sent = status, w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(p)
}

// Flush does nothing: every write reaches the reader as it is made.
func (w *pipeWriter) Flush() {}

// pipeBody is the response's body; Close ends the handler's request.
type pipeBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *pipeBody) Close() error {
	b.cancel()
	return b.PipeReader.Close()
}
