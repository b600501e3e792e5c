package edge

import (
	"strings"

	"github.com/tollgate/tollgate/internal/guard"
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
// mended, and net/http closes its connection short.
func answerPanic(w *statusWriter, requestID string) {
	e := oaierror.Internal.ForRequest(requestID)
	if w.status == 0 {
		guard.WriteInternal(w, requestID)
		return
	}
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		_, _ = w.Write([]byte("data: " + string(e.Body()) + "\n\n"))
		w.Flush()
	}
}
