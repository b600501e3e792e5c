package responses

import "github.com/tollgate/tollgate/extproc/sse"

// Both translations of a stream (Answer, Relay) read their input through
// these two.

// eachEvent feeds a piece of a stream to p and calls f with the data of
// every whole event the piece completes.
func eachEvent(p *sse.Parser, piece []byte, f func(data []byte)) {
	p.Feed(piece)
	for ev, ok := p.Next(); ok; ev, ok = p.Next() {
		f(ev.Data)
	}
}

// lastEvent calls f with the data of the event the stream ended without
// terminating, if there is one.
func lastEvent(p *sse.Parser, f func(data []byte)) {
	if ev, ok := p.Finish(); ok {
		f(ev.Data)
	}
}
