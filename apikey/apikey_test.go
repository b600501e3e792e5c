package apikey

import (
	"bytes"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGeneratedSecretHasTheDocumentedShape(t *testing.T) {
	s, err := Generate("tg", rand.Reader)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(s, "tg_sk_"))
	assert.Len(t, s, len("tg_sk_")+RandomLen)
	assert.NoError(t, Check("tg", s))
}

func TestGenerateIsDeterministicForTheSameRandomness(t *testing.T) {
	seed := bytes.Repeat([]byte{0xff}, 32)
	a, err := Generate("tg", bytes.NewReader(seed))
	require.NoError(t, err)
	b, err := Generate("tg", bytes.NewReader(seed))
	require.NoError(t, err)
	assert.Equal(t, a, b)
	zero, err := Generate("tg", bytes.NewReader(make([]byte, 32)))
	require.NoError(t, err)
	assert.Equal(t, "tg_sk_"+strings.Repeat("0", RandomLen), zero)
}

func TestGenerateRejectsBadPrefixAndShortRandomness(t *testing.T) {
	_, err := Generate("TG", rand.Reader)
	assert.Error(t, err)
	_, err = Generate("", rand.Reader)
	assert.Error(t, err)
	_, err = Generate("tg", bytes.NewReader(make([]byte, 5)))
	assert.Error(t, err)
}

func TestCheckRejectsMalformedSecrets(t *testing.T) {
	good, err := Generate("tg", rand.Reader)
	require.NoError(t, err)
	for _, s := range []string{"", "tg_sk_", "xx" + good[2:], good + "a", good[:len(good)-1], strings.Replace(good, "_sk_", "_pk_", 1), good[:10] + "!" + good[11:]} {
		assert.ErrorIs(t, Check("tg", s), ErrMalformed, s)
	}
}

func TestHintShowsOnlyTheLastFourCharacters(t *testing.T) {
	s := "tg_sk_" + strings.Repeat("a", RandomLen-4) + "WXYZ"
	assert.Equal(t, "tg_sk_…WXYZ", Hint(s))
	assert.NotContains(t, Hint(s), "aaaa")
}

func TestHashDiffersPerSecret(t *testing.T) {
	assert.NotEqual(t, HashOf("tg_sk_a"), HashOf("tg_sk_b"))
	assert.Equal(t, HashOf("tg_sk_a"), HashOf("tg_sk_a"))
}

// FuzzCheck: no input makes the key parser panic, and whatever it accepts
// has exactly the documented shape.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{"tg_sk_" + strings.Repeat("a", RandomLen), "", "tg_sk_", "_sk_", "tg_sk_\x00", "tg_sk_é" + strings.Repeat("a", RandomLen-2)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if Check("tg", s) != nil {
			return
		}
		if len(s) != len("tg_sk_")+RandomLen || s[:6] != "tg_sk_" {
			t.Fatalf("accepted %q", s)
		}
		_ = Hint(s)
	})
}

func TestTokensHaveTheirOwnShape(t *testing.T) {
	tok, err := GenerateToken(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+RandomLen {
		t.Fatalf("token %q", tok)
	}
	if err := CheckToken(tok); err != nil {
		t.Fatalf("CheckToken(%q) = %v", tok, err)
	}
	if err := Check(DefaultPrefix, tok); err == nil {
		t.Fatal("a token has an API key's shape")
	}
	key, _ := Generate(DefaultPrefix, rand.Reader)
	for _, bad := range []string{key, TokenPrefix + "short", TokenPrefix + strings.Repeat("!", RandomLen), ""} {
		if CheckToken(bad) == nil {
			t.Fatalf("CheckToken(%q) accepted it", bad)
		}
	}
	if h := TokenHint(tok); h != TokenPrefix+"…"+tok[len(tok)-4:] {
		t.Fatalf("hint %q", h)
	}
}
