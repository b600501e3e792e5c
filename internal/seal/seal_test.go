package seal

import (
	"bytes"
	"crypto/rand"
	"errors"
	"testing"
)

func TestASealedValueOpensOnlyUnderItsKeyAndData(t *testing.T) {
	key := Key([]byte("session secret"), "purpose A")
	sealed, err := Seal(key, []byte("sk-secret"), []byte("/keys/1"), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("sk-secret")) {
		t.Fatal("the plaintext shows in the sealed value")
	}
	plain, err := Open(key, sealed, []byte("/keys/1"))
	if err != nil || string(plain) != "sk-secret" {
		t.Fatalf("Open = %q, %v", plain, err)
	}
	for name, tc := range map[string]struct {
		key, sealed, data []byte
	}{
		"another purpose's key":  {Key([]byte("session secret"), "purpose B"), sealed, []byte("/keys/1")},
		"another secret's key":   {Key([]byte("other secret"), "purpose A"), sealed, []byte("/keys/1")},
		"other associated data":  {key, sealed, []byte("/keys/2")},
		"a changed byte":         {key, append(bytes.Clone(sealed[:len(sealed)-1]), sealed[len(sealed)-1]^1), []byte("/keys/1")},
		"shorter than its nonce": {key, sealed[:5], []byte("/keys/1")},
	} {
		if _, err := Open(tc.key, tc.sealed, tc.data); err == nil {
			t.Errorf("%s: opened", name)
		}
	}
	if _, err := Open(key, sealed[:5], nil); !errors.Is(err, ErrShort) {
		t.Errorf("short input: %v, want ErrShort", err)
	}
}

func TestEachSealHasItsOwnNonce(t *testing.T) {
	key := Key([]byte("s"), "l")
	a, err := Seal(key, []byte("same"), nil, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Seal(key, []byte("same"), nil, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Fatal("two seals of one value are equal")
	}
}
