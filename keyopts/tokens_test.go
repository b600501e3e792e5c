package keyopts

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

func TestParseTokenLimit(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64 // 0: Off
		err  string
	}{
		{"off", 0, ""}, {" OFF ", 0, ""}, {"40000", 40000, ""}, {"1", 1, ""},
		{"1000000000000", MaxTokenLimit, ""},
		{"0", 0, "tpm_limit: must be at least 1 token per minute, or Off; got 0"},
		{"-5", 0, "tpm_limit: must be at least 1 token per minute, or Off; got -5"},
		{"1000000000001", 0, "tpm_limit: must be at most 1000000000000 tokens per minute; got 1000000000001"},
		{"1e6", 0, `tpm_limit: "1e6" is not a whole number or "off"`},
	} {
		got, err := ParseTokenLimit(FieldTPMLimit, tc.in)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.in)
			assert.True(t, errors.Is(err, ErrInvalid))
			continue
		}
		require.NoError(t, err, tc.in)
		if tc.want == 0 {
			assert.Nil(t, got, tc.in)
		} else {
			assert.Equal(t, tc.want, *got, tc.in)
		}
	}
	_, err := ParseTokenLimit(FieldTokensPerDay, "0")
	assert.EqualError(t, err, "tokens_per_day: must be at least 1 token per day, or Off; got 0")
}

func TestUpdateSetsAndClearsTokenLimits(t *testing.T) {
	tpm, day, off := "5000", "200000", "off"
	k, err := Update(mustCreate(t), Patch{TPMLimit: &tpm, TokensPerDay: &day}, Rules{})
	require.NoError(t, err)
	assert.Equal(t, int64(5000), *k.TPMLimit)
	assert.Equal(t, int64(200000), *k.TokensPerDay)
	k, err = Update(k, Patch{TPMLimit: &off}, Rules{})
	require.NoError(t, err)
	assert.Nil(t, k.TPMLimit)
	assert.Equal(t, int64(200000), *k.TokensPerDay, "a field not given is left as it is")
	bad := "0"
	same, err := Update(k, Patch{TokensPerDay: &bad, TPMLimit: &tpm}, Rules{})
	var errs Errors
	require.ErrorAs(t, err, &errs)
	assert.NotEmpty(t, errs.Field(FieldTokensPerDay))
	assert.Equal(t, k, same, "an invalid field changes nothing")
}

func mustCreate(t *testing.T) store.Key {
	t.Helper()
	d := "test"
	k, err := Create(Patch{Description: &d}, Rules{})
	require.NoError(t, err)
	return k
}
