package store

import (
	"bytes"
	"errors"
	"testing"
	"testing/iotest"

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
