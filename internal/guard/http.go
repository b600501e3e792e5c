package guard

import (
	"log/slog"
	"net/http"

	"github.com/tollgate/tollgate/oaierror"
)

// Handler serves next under Recover. A panic before anything was written
// is answered 500 internal_error in OpenAI's shape, naming the request id
// (the x-request-id header); one after the response began cannot be
// answered any more, and the connection is cut (http.ErrAbortHandler), so
// that the client sees a broken answer, never a complete-looking one.
func Handler(where string, log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w := &startedWriter{ResponseWriter: rw}
		abort := false
		defer func() {
			if abort {
				panic(http.ErrAbortHandler)
			}
		}()
		defer Recover(where, log, func(*Panic) string {
			id := r.Header.Get("x-request-id")
			if w.started {
				abort = true
				return id
			}
			WriteInternal(w, id)
			return id
		})
		next.ServeHTTP(w, r)
	})
}

// WriteInternal answers 500 internal_error in OpenAI's shape.
func WriteInternal(w http.ResponseWriter, requestID string) {
	e := oaierror.Internal.ForRequest(requestID)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

// startedWriter notes whether the response has begun.
type startedWriter struct {
	http.ResponseWriter
	started bool
}

func (w *startedWriter) WriteHeader(code int) {
	if code >= 200 {
		w.started = true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *startedWriter) Write(b []byte) (int, error) {
	w.started = true
	return w.ResponseWriter.Write(b)
}

// Flush passes a flush on (streams and server-sent events).
func (w *startedWriter) Flush() {
	w.started = true
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *startedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
