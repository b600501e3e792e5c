package edge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/config"
)

// This file holds the response body's way back: streamed piece by piece
// through the upstream step, or whole (buffered) when the step asked.

// maxWholeBody bounds a non-streamed answer the edge buffers for the
// upstream step; a longer one is cut there, and the step answers 502.
const maxWholeBody = 32 << 20

// readSize is the edge's first read of a streamed answer. Stream events
// are small (a few hundred bytes): 4 KiB keeps a slow stream cheap, and is
// as much as most reads find at once (a smaller first read, tried, cost a
// fast stream a message more than it saved a slow one). A read that fills
// its buffer says more is waiting: the next read is twice as large, up to
// maxReadSize, so a fast or bulky stream passes through the upstream step
// in a few large messages rather than many small ones (each message is a
// round trip, whatever its size). A read that does not fill its buffer
// brings the next back to readSize, so a stream that waits for its next
// event holds a small buffer.
const (
	readSize    = 4 << 10
	maxReadSize = 64 << 10
)

// nextReadSize is the size of the read after one of size size that found n
// bytes.
func nextReadSize(size, n int) int {
	if n < size {
		return readSize
	}
	return min(2*size, maxReadSize)
}

// stream writes the final response, its body passed through the upstream
// step piece by piece and flushed to the client at once.
//
// When the provider breaks off — a reset, a silence longer than the
// endpoint's idle timeout, the request timeout, or Tollgate stopping — the
// upstream step is told the body has ended, so it ends the client's stream
// honestly (one error event, no [DONE]) and records the request as a
// provider failure. Only when the client itself left is nothing more sent.
//
// Every write to the client has a deadline (see writeDeadline): a client
// that stops reading ends the stream as one that left (the upstream step
// records it, 499, billed for what the provider produced), its connection
// closed, at the latest at the request timeout.
//
// The loop that waits for the provider is this frame alone, under
// ServeHTTP's: the connection's goroutine waits here for as long as the
// stream lasts, and keeps the stack its frames need (see ServeHTTP).
func (e *Edge) stream(ctx context.Context, q *served) {
	rl := &q.rl // fields one by one: a literal would be a copy in this frame
	rl.e, rl.ctx, rl.w, rl.a = e, ctx, &q.statusWriter, q.s.a
	if !rl.start(q.s.headers) {
		return
	}
	buf := make([]byte, readSize)
	for {
		n, err := rl.a.resp.Body.Read(buf)
		if buf = rl.next(buf, n, err); buf == nil {
			return
		}
	}
}

// relay is a streamed answer's way to the client.
type relay struct {
	e    *Edge
	ctx  context.Context
	w    http.ResponseWriter
	a    *attempt
	rc   http.ResponseController
	idle *time.Timer // pushed back by every piece read (see idleTimer); stopped by served.release
}

// start writes the response headers and starts the idle timer; false if
// the client cannot take them.
func (rl *relay) start(h headers) bool {
	rl.rc = *http.NewResponseController(rl.w)                  // a value: no allocation
	_ = rl.rc.SetWriteDeadline(rl.a.writeDeadline(time.Now())) // unsupported only by writers without a connection (tests)
	writeHeaders(rl.w, rl.a.status(), h)
	if err := rl.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		rl.e.opt.Logger.InfoContext(rl.ctx, "edge: stream ended early", "err", err)
		return false
	}
	rl.idle = rl.a.startIdleTimer()
	return true
}

// next passes on what a read of buf found (n bytes, err) and returns the
// buffer for the next read, or nil when the stream has ended.
func (rl *relay) next(buf []byte, n int, err error) []byte {
	if n > 0 {
		rl.idle.Reset(rl.a.idleTimeout())
		var piece []byte // its own: gRPC may still hold the previous one
		size := nextReadSize(len(buf), n)
		if n == len(buf) {
			// A full buffer is the piece; the next read gets a new one.
			piece, buf = buf, make([]byte, size)
		} else {
			piece = make([]byte, n)
			copy(piece, buf[:n])
			if size != len(buf) {
				buf = make([]byte, size)
			}
		}
		if serr := rl.send(piece, false); serr != nil {
			rl.e.opt.Logger.InfoContext(rl.ctx, "edge: stream ended early", "err", serr)
			return nil
		}
	}
	switch {
	case err == nil:
		return buf
	case errors.Is(err, io.EOF):
		if serr := rl.send(nil, true); serr != nil {
			rl.e.opt.Logger.InfoContext(rl.ctx, "edge: stream end", "err", serr)
		}
	case rl.ctx.Err() != nil:
		// the client left: ext_proc sees its stream end
	default:
		rl.e.brokeOff(rl.ctx, rl.a, err)
		if serr := rl.send(nil, true); serr != nil {
			rl.e.opt.Logger.InfoContext(rl.ctx, "edge: stream end after a provider failure", "err", serr)
		}
	}
	return nil
}

// send passes a piece through the upstream step and writes what it left.
func (rl *relay) send(piece []byte, end bool) error {
	pr, err := exchange(rl.a.proc, bodyMessage(piece, true, end))
	if err != nil {
		return err
	}
	out := piece
	if m := pr.GetResponseBody().GetResponse().GetBodyMutation(); m != nil {
		out = mutateBody(piece, m)
	}
	_ = rl.rc.SetWriteDeadline(rl.a.writeDeadline(time.Now()))
	if len(out) > 0 {
		if _, err := rl.w.Write(out); err != nil {
			return err
		}
	}
	if err := rl.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// whole reads a non-streamed answer whole, has the upstream step translate
// it, and returns the response as the step left it (possibly replaced).
func (e *Edge) whole(ctx context.Context, a *attempt) *response {
	idle := a.idleTimer()
	body, err := readSized(a.resp.Body, a.resp.ContentLength, maxWholeBody)
	idle.Stop()
	if err != nil {
		if ctx.Err() != nil {
			return e.internal(ctx, "client left during a buffered answer", err)
		}
		// What came is handed on as the whole body: the upstream step
		// cannot translate a cut answer and answers 502.
		e.brokeOff(ctx, a, err)
	}
	pr, err := exchange(a.proc, bodyMessage(body, true, true))
	if err != nil {
		return e.internal(ctx, "upstream step response body", err)
	}
	if imm := pr.GetImmediateResponse(); imm != nil {
		return immediateResponse(imm)
	}
	h := a.respHeaders // the attempt's own: its status is kept apart (statusCode)
	if c := pr.GetResponseBody().GetResponse(); c != nil {
		applyCommon(h, c)
		if m := c.GetBodyMutation(); m != nil {
			body = mutateBody(body, m)
		}
	}
	st, _ := strconv.Atoi(h[":status"])
	delete(h, ":status")
	delete(h, "content-length")
	if body == nil {
		body = []byte{}
	}
	return &response{status: st, headers: h, body: body}
}

// brokeOff logs a provider's answer that ended in the middle and, when it
// was the provider's doing (a reset or a silence, not the request timeout
// nor Tollgate stopping), counts it against the endpoint.
func (e *Edge) brokeOff(ctx context.Context, a *attempt, err error) {
	if a.idled.Load() {
		err = errTimeout
	}
	e.opt.Logger.WarnContext(ctx, "edge: upstream answer broke off", "deployment", a.ep.Deployment, "err", err)
	if a.idled.Load() || a.reqCtx.Err() == nil {
		e.failure(ctx, a.ep)
	}
}

// finalWriteGrace is how long past the request timeout the last writes of
// a stream (its error event) may take.
const finalWriteGrace = time.Second

// writeDeadline is the deadline of a write to the client made at now: the
// endpoint's idle timeout from now (a client that takes nothing for that
// long is gone, as a provider that sends nothing for that long is), and
// never past the request timeout and finalWriteGrace.
func (a *attempt) writeDeadline(now time.Time) time.Time {
	d := now.Add(orDefault(a.ep.IdleTimeout, config.DefaultStreamIdleTimeout))
	if end, ok := a.reqCtx.Deadline(); ok && end.Add(finalWriteGrace).Before(d) {
		d = end.Add(finalWriteGrace)
	}
	return d
}

// startIdleTimer bounds every silence of the response body by the
// endpoint's idle timeout: the attempt's timer, stopped when the response
// headers came (send), now cancels the provider request after a silence,
// and is pushed back by every piece read (idleTimeout). It costs no
// goroutine until it fires.
func (a *attempt) startIdleTimer() *time.Timer {
	a.reading.Store(true)
	a.timer.Reset(a.idleTimeout())
	return a.timer
}

func (a *attempt) idleTimeout() time.Duration {
	return orDefault(a.ep.IdleTimeout, config.DefaultStreamIdleTimeout)
}

// idleTimer is startIdleTimer for a body read at once: every read that
// returns data pushes the timer back. Stop the timer when the read ends.
func (a *attempt) idleTimer() *time.Timer {
	t := a.startIdleTimer()
	a.body = resettingBody{ReadCloser: a.resp.Body, t: t, d: a.idleTimeout()}
	a.resp.Body = &a.body
	return t
}

// resettingBody pushes the idle timer back on every read that returns data.
type resettingBody struct {
	io.ReadCloser
	t *time.Timer
	d time.Duration
}

func (b *resettingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.t.Reset(b.d)
	}
	return n, err
}
