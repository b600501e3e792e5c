package provider

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
)

// BenchmarkStreamEvent is the cost of translating (and metering) one
// streamed event, per provider type: each fixture text stream, its content
// events repeated to make a long answer, is fed one event a piece, as
// providers flush them; ns/op and allocs/op are per event. `make bench`
// reports them.
func BenchmarkStreamEvent(b *testing.B) {
	for _, typ := range []string{config.TypeOpenAI, config.TypeAzure, config.TypeAnthropic, config.TypeGemini} {
		b.Run(typ, func(b *testing.B) {
			raw, err := os.ReadFile(filepath.Join("testdata", typ, "stream_text.sse"))
			require.NoError(b, err)
			var events [][]byte
			sep := []byte("\n\n")
			if bytes.Contains(raw, []byte("\r\n\r\n")) {
				sep = []byte("\r\n\r\n") // Gemini ends its events so
			}
			for _, e := range bytes.SplitAfter(raw, sep) {
				if len(bytes.TrimSpace(e)) > 0 {
					events = append(events, e)
				}
			}
			require.NotEmpty(b, events)
			// A long answer: the content events repeated 20 times, then the
			// end (the last two: finish and usage, or usage and [DONE]), so
			// that what a stream costs once is spread as in a real answer.
			if n := len(events); n > 2 {
				body, tail := events[:n-2], events[n-2:]
				var long [][]byte
				for range 20 {
					long = append(long, body...)
				}
				events = append(long, tail...)
			}
			// The translators are made beforehand: a stream's setup is the
			// request's cost, not its events'.
			resps := make([]Response, b.N/len(events)+1)
			for i := range resps {
				resps[i] = newTestResponse(b, typ, true, true)
				resps[i].Status(200)
			}
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for _, resp := range resps {
				for i, e := range events {
					if _, err := resp.Body(e, i == len(events)-1); err != nil {
						b.Fatal(err)
					}
				}
				n += len(events)
			}
			// About b.N events were asked for; n were translated (whole
			// streams), which ns/event divides by.
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/event")
		})
	}
}
