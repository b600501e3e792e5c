package provider

import (
	"bytes"
	"encoding/binary"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
)

// burst is a stream's beginning with one of its pieces of text (unit)
// repeated until the whole is several times KeptBuffer: what a provider's
// burst of events, read at once, hands a translator in one piece. The
// unit is the first event (or Bedrock frame) after the first that holds
// mark.
func burst(t *testing.T, typ string) (whole, unit []byte) {
	t.Helper()
	var units [][]byte // the stream's events, or frames
	mark := map[string]string{config.TypeOpenAI: `"delta"`, config.TypeAnthropic: `content_block_delta`,
		config.TypeGemini: `"text"`, config.TypeBedrock: `contentBlockDelta`}[typ]
	if typ == config.TypeBedrock {
		stream := bedrockEvents(t, "stream_text.events.json")
		for len(stream) > 0 {
			n := int(binary.BigEndian.Uint32(stream))
			units, stream = append(units, stream[:n]), stream[n:]
		}
	} else {
		stream := string(readFixture(t, filepath.Join(typ, "stream_text.sse")))
		sep := "\n\n"
		if strings.Contains(stream, "\r\n\r\n") {
			sep = "\r\n\r\n" // Gemini's
		}
		for ev := range strings.SplitAfterSeq(stream, sep) {
			units = append(units, []byte(ev))
		}
	}
	for i, u := range units {
		if i > 0 && bytes.Contains(u, []byte(mark)) {
			out := bytes.Join(units[:i], nil)
			for len(out) < 4*KeptBuffer {
				out = append(out, u...)
			}
			return out, u
		}
	}
	t.Fatalf("%s: no piece of text in the fixture", typ)
	return nil, nil
}

// A stream that waits for its provider after a burst of events keeps
// neither the burst's bytes nor the buffer their translation was written
// into: the piece and the answer go with their message, and the stream
// holds only small buffers until the next piece (for minutes, maybe).
func TestAStreamWaitingAfterABurstHoldsNeitherItNorItsAnswer(t *testing.T) {
	for _, typ := range []string{config.TypeOpenAI, config.TypeAnthropic, config.TypeGemini, config.TypeBedrock} {
		t.Run(typ, func(t *testing.T) {
			resp := newTestResponse(t, typ, true, false)
			require.Equal(t, 200, resp.Status(200))
			whole, unit := burst(t, typ)
			piece := append([]byte(nil), whole...)
			out, err := resp.Body(piece, false)
			require.NoError(t, err)
			require.Greater(t, len(out), KeptBuffer, "the burst is translated whole")
			pieceRef, outRef := weak.Make(&piece[0]), weak.Make(&out[0])
			piece, out = nil, nil //nolint:ineffassign,wastedassign // dropped, as the message is once sent
			runtime.GC()
			assert.Nil(t, pieceRef.Value(), "the translator keeps no reference to the piece")
			assert.Nil(t, outRef.Value(), "nor to the answer's bytes")

			// The stream goes on as before.
			completion := len(resp.Completion())
			more, err := resp.Body(bytes.Repeat(unit, 2), false)
			require.NoError(t, err)
			assert.NotEmpty(t, more)
			assert.Greater(t, len(resp.Completion()), completion)
		})
	}
}
