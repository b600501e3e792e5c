package app

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/tollgate/tollgate/internal/periodic"
)

// newLogger builds a logger writing format ("json" or "text") to w.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(format, LogText) {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Access-log buffering: the access log writes a line per request, and a
// write per line is a system call per request. lineBuffer gathers whole
// lines and writes them out together, as Envoy's access logs do
// (access_log_flush_interval, one second by default).
const (
	accessFlushInterval = time.Second
	// accessFlushBytes bounds one write: whole lines, at most PIPE_BUF, so
	// that on a pipe they never interleave with another writer's lines.
	accessFlushBytes = 4096
)

// lineBuffer is an io.Writer for a slog handler (one whole line a Write)
// that writes its lines to w in batches: when the next line would not fit
// in accessFlushBytes, every accessFlushInterval, and on Close. A line
// longer than the bound is written alone, at once.
type lineBuffer struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte
	closed bool

	flushes *periodic.Loop
}

// newLineBuffer starts a lineBuffer on w that flushes every interval;
// Close flushes and ends it.
func newLineBuffer(w io.Writer, interval time.Duration) *lineBuffer {
	b := &lineBuffer{w: w, buf: make([]byte, 0, accessFlushBytes)}
	b.flushes = periodic.Start(interval, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.flushLocked()
	})
	return b
}

func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > accessFlushBytes {
		b.flushLocked()
	}
	if len(p) > accessFlushBytes || b.closed {
		return b.w.Write(p)
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lineBuffer) flushLocked() {
	if len(b.buf) == 0 {
		return
	}
	_, _ = b.w.Write(b.buf) // a log that cannot be written has nowhere to say so
	b.buf = b.buf[:0]
}

// Close writes what is buffered and stops the flushes; later lines are
// written at once.
func (b *lineBuffer) Close() {
	b.flushes.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
	b.closed = true
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
