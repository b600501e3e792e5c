package store

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestChangePayloadsRoundTripAndUnknownOnesMeanAll(t *testing.T) {
	all := Change{Kind: ChangeAll}
	tests := []struct {
		name    string
		payload string
		want    Change
	}{
		{"key", Change{Kind: ChangeKey, ID: "key_abc"}.payload(), Change{Kind: ChangeKey, ID: "key_abc"}},
		{"account", Change{Kind: ChangeAccount, ID: "acct_abc"}.payload(), Change{Kind: ChangeAccount, ID: "acct_abc"}},
		{"unknown kind", "plan:pro", all},
		{"no id", "key:", all},
		{"no separator", "key_abc", all},
		{"empty", "", all},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, parseChange(tc.payload))
		})
	}
}
