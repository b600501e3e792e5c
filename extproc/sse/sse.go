// Package sse parses a Server-Sent Events byte stream incrementally: pieces
// of the stream may end anywhere (inside a field, between CR and LF), and
// only an unfinished event is ever copied.
package sse

import "bytes"

// Event is one complete event. Its slices alias the parser's buffer or the
// piece last fed, and are valid until the next call to Feed.
type Event struct {
	// Name is the event field ("" for the default "message").
	Name []byte
	// Data is the data lines joined by '\n'.
	Data []byte
	// Raw is the event's exact bytes, through its terminating blank line.
	Raw []byte
}

// Parser splits a stream into events. The zero value is ready to use.
type Parser struct {
	data  []byte // what is being parsed: a fed piece or buf
	off   int    // start of the first unparsed event in data
	buf   []byte // owned copy of an unfinished event and what followed it
	owned bool   // data is buf
	multi []byte // scratch for multi-line data
}

// Feed adds the next piece of the stream. Events completed by it are then
// read with Next.
func (p *Parser) Feed(piece []byte) {
	rest := p.data[p.off:]
	switch {
	case len(rest) == 0:
		p.data, p.owned = piece, false
	case p.owned:
		p.buf = append(p.buf[:copy(p.buf, rest)], piece...)
		p.data = p.buf
	default:
		p.buf = append(append(p.buf[:0], rest...), piece...)
		p.data, p.owned = p.buf, true
	}
	p.off = 0
}

// Pending is the number of bytes of an unfinished event held back.
func (p *Parser) Pending() int { return len(p.data) - p.off }

// Next returns the next complete event, or false when the rest of what was
// fed is an unfinished event. That rest is kept (copied if it belongs to the
// caller's piece) for the next Feed.
func (p *Parser) Next() (Event, bool) {
	ev, n, ok := parseEvent(p.data[p.off:], false, &p.multi)
	if !ok {
		p.keepRest()
		return Event{}, false
	}
	p.off += n
	return ev, true
}

// Finish returns what is left at the end of the stream as a last event, for
// streams whose final event lacks its blank line (a bare "data: [DONE]").
// It returns false when nothing but blank space is left.
func (p *Parser) Finish() (Event, bool) {
	rest := p.data[p.off:]
	p.off = len(p.data)
	if len(bytes.TrimSpace(rest)) == 0 {
		return Event{}, false
	}
	ev, _, _ := parseEvent(rest, true, &p.multi)
	return ev, true
}

func (p *Parser) keepRest() {
	rest := p.data[p.off:]
	if p.owned && (cap(p.buf) <= keptBuffer || len(rest) > keptBuffer/2) {
		return
	}
	// The caller's piece is let go; so is a buffer that grew past
	// keptBuffer for a burst of events, once what is left of it is small:
	// a stream waiting for its next piece holds no large buffer.
	buf := p.buf[:0]
	if cap(buf) > keptBuffer {
		buf = nil
	}
	p.buf = append(buf, rest...)
	p.data, p.off, p.owned = p.buf, 0, true
}

// keptBuffer is the most the parser keeps of its buffer between pieces
// when what it holds is small.
const keptBuffer = 4 << 10

// parseEvent reads one event from the start of b. It returns the event, the
// bytes it used, and whether it was complete (ended by a blank line, or by
// the end of b when atEOF).
func parseEvent(b []byte, atEOF bool, scratch *[]byte) (Event, int, bool) {
	var ev Event
	dataLines := 0
	var firstData []byte
	i := 0
	for {
		// Find the end of the line starting at i.
		j := i
		for j < len(b) && b[j] != '\n' && b[j] != '\r' {
			j++
		}
		if j == len(b) {
			if !atEOF {
				return Event{}, 0, false
			}
			if j > i {
				dataLines, firstData = field(&ev, b[i:j], dataLines, firstData, scratch)
			}
			i = j
			break
		}
		// A CR at the very end might be the first half of CRLF.
		if b[j] == '\r' && j+1 == len(b) && !atEOF {
			return Event{}, 0, false
		}
		next := j + 1
		if b[j] == '\r' && j+1 < len(b) && b[j+1] == '\n' {
			next = j + 2
		}
		line := b[i:j]
		i = next
		if len(line) == 0 {
			if onlyBlank(b[:i]) {
				// Leading blank lines between events: skip them.
				continue
			}
			break
		}
		dataLines, firstData = field(&ev, line, dataLines, firstData, scratch)
	}
	switch dataLines {
	case 0:
	case 1:
		ev.Data = firstData
	default:
		ev.Data = *scratch
	}
	ev.Raw = b[:i]
	return ev, i, true
}

func onlyBlank(b []byte) bool {
	for _, c := range b {
		if c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

func field(ev *Event, line []byte, dataLines int, firstData []byte, scratch *[]byte) (int, []byte) {
	if line[0] == ':' { // comment
		return dataLines, firstData
	}
	name, value := line, []byte(nil)
	if k := bytes.IndexByte(line, ':'); k >= 0 {
		name, value = line[:k], line[k+1:]
		if len(value) > 0 && value[0] == ' ' {
			value = value[1:]
		}
	}
	switch string(name) {
	case "data":
		switch dataLines {
		case 0:
			firstData = value
		case 1:
			*scratch = append(append(append((*scratch)[:0], firstData...), '\n'), value...)
		default:
			*scratch = append(append(*scratch, '\n'), value...)
		}
		dataLines++
	case "event":
		ev.Name = value
	}
	return dataLines, firstData
}
