package provider

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

// TestTopValuesFindWhatGjsonFinds: the one walk of a body's top level
// finds each key's value as gjson.Get does — the first of two, none inside
// a nested object or a message, none for an empty key or a body that is
// not an object.
func TestTopValuesFindWhatGjsonFinds(t *testing.T) {
	long := strings.Repeat(`{"role":"user","content":"say \"max_tokens\": 9","max_tokens":7},`, 200)
	bodies := []string{
		`{"model":"m","max_tokens":100,"n":2}`,
		`{"messages":[` + long + `{"role":"user","content":"x"}],"max_completion_tokens":50}`,
		`{"max_tokens":1,"max_tokens":2}`,
		`{"metadata":{"max_tokens":5},"n":null}`,
		`{"max_tokens":"12","n":3.5}`,
		`[{"max_tokens":1}]`,
		`"max_tokens"`,
		``,
		`{"max_tokens":12`,
	}
	for _, b := range bodies {
		var v [3]gjson.Result
		topValues([]byte(b), "max_tokens", "max_completion_tokens", "n", &v)
		for i, k := range []string{"max_tokens", "max_completion_tokens", "n"} {
			want := gjson.Get(b, k)
			assert.Equal(t, want.Raw, v[i].Raw, "%s in %.60q", k, b)
			assert.Equal(t, want.Type, v[i].Type, "%s in %.60q", k, b)
		}
		var none [3]gjson.Result
		topValues([]byte(b), "", "", "", &none)
		assert.False(t, none[0].Exists() || none[1].Exists() || none[2].Exists(), "an empty key finds nothing")
	}
	m := &config.Model{MaxTokens: 1000}
	assert.Equal(t, int64(200), HeldOutput([]byte(`{"max_tokens":100,"n":2}`), m))
	assert.Equal(t, int64(50), HeldOutput([]byte(`{"messages":[`+long+`{}],"max_completion_tokens":50,"max_tokens":80}`), m))
	assert.Equal(t, int64(1000), HeldOutput([]byte(`{"messages":[`+long+`{}]}`), m), "the model's limit, one answer")
}

// TestLimitToHeldIsLimitBodyOfTheOutputLimit: reading the body once for
// both gives the body the two steps give, for each limit field and
// whatever limits the body and the model set.
func TestLimitToHeldIsLimitBodyOfTheOutputLimit(t *testing.T) {
	bodies := []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":100}`,
		`{"model":"m","max_completion_tokens":50,"max_tokens":80}`,
		`{"model":"m","max_tokens":5000,"max_output_tokens":7}`,
		`{"model":"m","max_tokens":"12","max_completion_tokens":null}`,
		`{"model":"m","max_completion_tokens":1000}`,
	}
	for _, b := range bodies {
		for _, field := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
			for _, modelMax := range []int64{0, 1000} {
				want, wantErr := LimitBody([]byte(b), field, OutputLimit([]byte(b), modelMax))
				got, err := LimitToHeld([]byte(b), field, modelMax)
				assert.Equal(t, wantErr, err)
				assert.Equal(t, string(want), string(got), "%s, field %s, model's limit %d", b, field, modelMax)
			}
		}
	}
}
