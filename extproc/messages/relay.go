package messages

import (
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/extproc/sse"
	"github.com/tollgate/tollgate/oaierror"
)

// Relay hands an Anthropic deployment's answer to a Messages client as
// Anthropic wrote it — every event, thinking and signatures included —
// but for the model, which is the one the client asked for. The
// Anthropic adapter's translator (provider.AnthropicRelay) reads the same
// bytes alongside, for the usage, the text, and the outcome; what it
// writes is dropped. An error answer is given in Anthropic's shape from
// the translator's (a provider's refusal of Tollgate's credential is not
// the client's to see).
type Relay struct {
	meter  provider.Response
	opt    Options
	status int

	whole  []byte
	parser sse.Parser
	out    []byte
	ended  bool // message_stop or an error event passed
	failed bool // Tollgate wrote an error event
}

// NewRelay relays an answer that meter (provider.AnthropicRelay's
// Response) meters.
func NewRelay(meter provider.Response, opt Options) *Relay {
	return &Relay{meter: meter, opt: opt}
}

func (r *Relay) Status(status int) int {
	r.status = r.meter.Status(status)
	return r.status
}

func (r *Relay) Usage() provider.Usage { return r.meter.Usage() }
func (r *Relay) Completion() string    { return r.meter.Completion() }
func (r *Relay) Failed() bool          { return r.meter.Failed() || r.failed }
func (r *Relay) Completed() bool       { return r.meter.Completed() && !r.failed }

// Body relays the next piece of Anthropic's answer.
func (r *Relay) Body(piece []byte, end bool) ([]byte, error) {
	translated, err := r.meter.Body(piece, end)
	ok := r.status >= 200 && r.status < 300
	if !ok {
		r.whole = append(r.whole, translated...)
		if !end {
			return nil, err
		}
		return ErrorBody(r.status, r.whole), err
	}
	if !r.opt.Stream {
		r.whole = append(r.whole, piece...)
		if err != nil || !end {
			return nil, err
		}
		out, serr := sjson.SetBytes(r.whole, "model", r.opt.Model)
		if serr != nil {
			return nil, provider.ErrUntranslatable
		}
		return out, nil
	}
	r.out = r.out[:0]
	if r.ended {
		return r.out, err
	}
	r.parser.Feed(piece)
	for !r.ended {
		ev, ok := r.parser.Next()
		if !ok {
			break
		}
		r.event(ev)
	}
	if err != nil {
		return r.out, err
	}
	if end && !r.ended {
		if ev, ok := r.parser.Finish(); ok {
			r.event(ev)
		}
		if !r.ended && !r.meter.Completed() {
			r.fail(oaierror.UpstreamFailed.With("The provider's answer ended before it was complete.", ""))
		}
	}
	return r.out, nil
}

// event passes one event on: message_start with the asked model, the
// rest byte for byte.
func (r *Relay) event(ev sse.Event) {
	name := string(ev.Name)
	switch name {
	case "message_start":
		data, err := sjson.SetBytes(ev.Data, "message.model", r.opt.Model)
		if err == nil {
			r.out = append(r.out, "event: message_start\ndata: "...)
			r.out = append(r.out, data...)
			r.out = append(r.out, "\n\n"...)
			return
		}
	case "message_stop", "error":
		r.ended = true
	}
	r.out = append(r.out, ev.Raw...)
}

// ErrorEvent ends a stream with Anthropic's error event.
func (r *Relay) ErrorEvent(e oaierror.Error) []byte {
	r.out = r.out[:0]
	r.fail(e)
	return append([]byte(nil), r.out...)
}

func (r *Relay) fail(e oaierror.Error) {
	if r.ended {
		return
	}
	r.ended, r.failed = true, true
	r.out = append(r.out, "event: error\ndata: "...)
	r.out = append(r.out, e.AnthropicBody()...)
	r.out = append(r.out, "\n\n"...)
}
