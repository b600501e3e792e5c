package dashboard

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHashPasswordIsArgon2idWithItsParametersAndSalt(t *testing.T) {
	withOWASPCost(t)
	h, err := HashPassword("s3cret-pass", rand.Reader)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$"), h)
	assert.NotContains(t, h, "s3cret-pass")

	ok, err := verifyPassword(h, "s3cret-pass")
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = verifyPassword(h, "s3cret-pasS")
	require.NoError(t, err)
	assert.False(t, ok)

	again, err := HashPassword("s3cret-pass", rand.Reader)
	require.NoError(t, err)
	assert.NotEqual(t, h, again, "each hash has its own salt")
}

func TestHashPasswordChecksTheLength(t *testing.T) {
	tests := []struct {
		name    string
		pw      string
		wantErr string
	}{
		{name: "seven bytes", pw: "1234567", wantErr: "at least 8"},
		{name: "empty", pw: "", wantErr: "at least 8"},
		{name: "eight bytes", pw: "12345678"},
		{name: "256 bytes", pw: strings.Repeat("x", 256)},
		{name: "257 bytes", pw: strings.Repeat("x", 257), wantErr: "at most 256"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := HashPassword(tt.pw, rand.Reader)
			if tt.wantErr == "" {
				assert.NoError(t, err)
			} else {
				assert.ErrorContains(t, err, tt.wantErr)
			}
		})
	}
}

func TestHashPasswordFailsWithoutRandomness(t *testing.T) {
	_, err := HashPassword("long enough", bytes.NewReader(nil))
	assert.Error(t, err)
}

func TestVerifyPasswordReadsOtherParametersAndRefusesMalformedHashes(t *testing.T) {
	withOWASPCost(t)
	cheap := encodeHash(argon2Params{memory: 64, time: 1, threads: 1, keyLen: 16}, []byte("saltsalt"), "pw")
	ok, err := verifyPassword(cheap, "pw")
	require.NoError(t, err)
	assert.True(t, ok, "parameters come from the encoded hash")

	good, err := HashPassword("password", rand.Reader)
	require.NoError(t, err)
	parts := strings.Split(good, "$")
	for name, bad := range map[string]string{
		"empty":             "",
		"bcrypt":            "$2a$10$abcdefghijklmnopqrstuv",
		"argon2i":           strings.Replace(good, "argon2id", "argon2i", 1),
		"old version":       strings.Replace(good, "v=19", "v=16", 1),
		"junk after params": strings.Replace(good, "p=1", "p=1x", 1),
		"huge memory":       strings.Replace(good, "m=19456", "m=99999999", 1),
		"zero time":         strings.Replace(good, "t=2", "t=0", 1),
		"bad salt":          strings.Join([]string{"", parts[1], parts[2], parts[3], "!!", parts[5]}, "$"),
		"short hash":        strings.Join([]string{"", parts[1], parts[2], parts[3], parts[4], "AAAA"}, "$"),
		"missing part":      strings.Join(parts[:5], "$"),
	} {
		_, err := verifyPassword(bad, "password")
		assert.ErrorIs(t, err, errMalformedHash, name)
	}
}

func TestDummyHashUsesTheCurrentParameters(t *testing.T) {
	withOWASPCost(t)
	p, _, _, err := decodeHash(dummyHash())
	require.NoError(t, err)
	assert.Equal(t, currentParams, p)
	assert.Equal(t, argon2Params{memory: 19 * 1024, time: 2, threads: 1, keyLen: 32}, p, "OWASP's minimum")
}
