package edge

import (
	"strings"

	"github.com/tollgate/tollgate/oaierror"
)

// WherePanic is where the edge's recovered panics are counted
// (tollgate_panics_total).
const WherePanic = "edge"

// answerPanic answers a request whose handling panicked (ServeHTTP
// recovers it with guard; the request's ext_proc streams then end with its
// context, and their steps record the request and release its hold). Before
// the answer began, the client gets 500 internal_error; in a stream, one
// error event and no [DONE]; a whole answer already begun cannot be
// mended, and net/http closes its connection short. Both are in the shape
// of the request's path: on the Messages API, Anthropic's body and its
// "error" event.
func answerPanic(w *statusWriter, requestID string, shape oaierror.Shape) {
	e := oaierror.Internal.ForRequest(requestID)
	if w.status == 0 {
		writeError(w, e, shape, nil)
		return
	}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		event := ""
		if shape == oaierror.ShapeAnthropic {
			event = "event: error\n"
		}
		_, _ = w.Write([]byte(event + "data: " + string(e.BodyFor(shape)) + "\n\n"))
		w.Flush()
	}
}
