package store

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNewIDIsPrefixPlusSixteenBase62Chars(t *testing.T) {
	tests := []struct {
		name   string
		random []byte
		want   string
	}{
		{"bytes map mod 62", append([]byte{0, 9, 10, 35, 36, 61, 62, 123, 185, 186, 247, 1, 2, 3, 4, 5}, make([]byte, 16)...), "key_09AZaz0zz0z12345"},
		{"bytes of 248 and above are skipped", append([]byte{248, 255, 250, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}, make([]byte, 12)...), "key_123456789ABCDEFG"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newID(bytes.NewReader(tc.random), keyIDPrefix)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNewIDReportsAFailingRandomSource(t *testing.T) {
	boom := errors.New("boom")
	_, err := newID(iotest.ErrReader(boom), accountIDPrefix)
	require.ErrorIs(t, err, boom)
}

// TestOrderedIDsSortAsTheirTimes: IDs drawn at later times sort after
// earlier ones as text, whatever their random part; IDs of the same
// millisecond differ; each is 26 characters of Crockford base32 whose
// first ten are the time's milliseconds.
func TestOrderedIDsSortAsTheirTimes(t *testing.T) {
	base := time.Date(2026, 11, 27, 21, 0, 0, 0, time.UTC)
	var ids []string
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, time.Second, time.Hour, 24 * 365 * time.Hour, 40 * 365 * 24 * time.Hour} {
		for range 50 {
			ids = append(ids, OrderedID(base.Add(d)))
		}
	}
	for i := 1; i < len(ids); i++ {
		if i%50 != 0 {
			continue // the same millisecond: ordered by chance
		}
		require.Less(t, ids[i-1], ids[i], "an ID of a later time sorts after")
	}
	require.Less(t, OrderedID(time.UnixMilli(31)), OrderedID(time.UnixMilli(32)), "across a digit")
	require.Less(t, OrderedID(time.UnixMilli(0)), OrderedID(time.UnixMilli(1)))

	seen := map[string]bool{}
	for range 10000 {
		id := OrderedID(base)
		require.Len(t, id, OrderedIDLen)
		require.False(t, seen[id], "IDs of one millisecond differ")
		seen[id] = true
		for _, c := range id {
			require.Contains(t, crockford, string(c))
		}
		ms := uint64(0)
		for _, c := range id[:10] {
			ms = ms<<5 | uint64(strings.IndexRune(crockford, c))
		}
		require.Equal(t, uint64(base.UnixMilli()), ms)
	}
}
