package edge

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
)

func TestAWriteToTheClientWaitsAtMostTheIdleTimeoutAndNeverPastTheRequestTimeout(t *testing.T) {
	now := time.Unix(1750000000, 0)
	end, cancel := context.WithDeadline(context.Background(), now.Add(10*time.Second))
	defer cancel()
	a := &attempt{ep: Endpoint{IdleTimeout: 3 * time.Second}, reqCtx: end}
	assert.Equal(t, now.Add(3*time.Second), a.writeDeadline(now), "the idle timeout from now")
	assert.Equal(t, now.Add(10*time.Second+finalWriteGrace), a.writeDeadline(now.Add(9*time.Second)),
		"the request timeout, and a moment for the last event")
	assert.Equal(t, now.Add(10*time.Second+finalWriteGrace), a.writeDeadline(now.Add(20*time.Second)),
		"past the request timeout, no later")

	a = &attempt{reqCtx: context.Background()}
	assert.Equal(t, now.Add(config.DefaultStreamIdleTimeout), a.writeDeadline(now), "the default idle timeout")
}

func TestAStreamedAnswerReachesTheClientWholeWhateverTheSizesOfItsPieces(t *testing.T) {
	// Pieces smaller than the edge's read, as large, larger, and several
	// times as large, each flushed alone.
	var want bytes.Buffer
	sizes := []int{1, readSize - 1, readSize, readSize + 1, 2 * readSize, 3*readSize + 7, 100, 5,
		maxReadSize - 1, maxReadSize, maxReadSize + 1, 5*maxReadSize + 3, 7}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, n := range sizes {
			_, _ = w.Write(bytes.Repeat([]byte{byte('a' + i)}, n))
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	for i, n := range sizes {
		want.Write(bytes.Repeat([]byte{byte('a' + i)}, n))
	}
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	f := newFixture(t, 3, Endpoint{Base: u, Weight: 1, Deployment: "m#0"})
	rec := f.do(t)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, want.String(), rec.Body.String())
}

func TestAStreamReadsMoreAtOnceWhileItsReadsComeBackFull(t *testing.T) {
	size, sizes := readSize, []int{}
	for range 6 {
		size = nextReadSize(size, size)
		sizes = append(sizes, size)
	}
	assert.Equal(t, []int{2 * readSize, 4 * readSize, 8 * readSize, maxReadSize, maxReadSize, maxReadSize}, sizes,
		"a full read doubles the next, up to the bound")
	assert.Equal(t, readSize, nextReadSize(maxReadSize, maxReadSize-1), "a read that is not full brings it back")
	assert.Equal(t, readSize, nextReadSize(readSize, 300))
}

func TestABodyOfKnownLengthIsReadWholeAndAShortOneIsAnError(t *testing.T) {
	for _, c := range []struct {
		name    string
		body    string
		n       int64
		want    string
		wantErr error
	}{
		{"as long as it said", "hello", 5, "hello", nil},
		{"length unknown", "hello", -1, "hello", nil},
		{"empty", "", 0, "", nil},
		{"shorter than it said", "hel", 5, "hel", io.ErrUnexpectedEOF},
		{"nothing where it said five", "", 5, "", io.ErrUnexpectedEOF},
		{"past the limit, unknown length: cut at the limit", "0123456789", -1, "01234567", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := readSized(strings.NewReader(c.body), c.n, 8)
			assert.ErrorIs(t, err, c.wantErr)
			assert.Equal(t, c.want, string(got))
		})
	}

	// A body declaring more than maxSizedRead and bringing little holds
	// what it brought, not what it declared.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	got, err := readSized(strings.NewReader("tiny"), 64<<20, 64<<20)
	runtime.ReadMemStats(&after)
	require.NoError(t, err, "a reader shorter than declared, read past maxSizedRead, ends at its EOF")
	assert.Equal(t, "tiny", string(got))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "64 MiB declared, 4 bytes sent")

	_, err = readLimited(strings.NewReader("0123456789"), 10, 8)
	assert.ErrorIs(t, err, errTooLarge, "a Content-Length past the limit")
	_, err = readLimited(strings.NewReader("0123456789"), -1, 8)
	assert.ErrorIs(t, err, errTooLarge, "a body past the limit, its length unknown")
	got, err = readLimited(strings.NewReader("01234567"), 8, 8)
	require.NoError(t, err)
	assert.Equal(t, "01234567", string(got))
}

func TestAnAnswerWithHeadersLongerThanTheTransportsReadBufferPassesWhole(t *testing.T) {
	long := strings.Repeat("h", 6<<10)
	body := `{"id":"x","choices":[]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		for i := range 4 {
			w.Header().Set(fmt.Sprintf("X-Long-%d", i), long)
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	f := newFixture(t, 3, Endpoint{Base: u, Weight: 1, Deployment: "m#0"})
	rec := f.do(t)
	require.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, body, rec.Body.String())
}
