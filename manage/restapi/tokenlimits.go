package restapi

import (
	"encoding/json"
	"strconv"

	"github.com/tollgate/tollgate/keyopts"
)

// tokenLimitFields reads a key's token limits (tpm_limit, tokens_per_day:
// null is Off, else a whole number of tokens) from a body into p.
func tokenLimitFields(fields map[string]json.RawMessage, p *keyopts.Patch) error {
	for _, f := range []struct {
		name string
		dst  **string
	}{{keyopts.FieldTPMLimit, &p.TPMLimit}, {keyopts.FieldTokensPerDay, &p.TokensPerDay}} {
		var n *int64
		ok, err := field(fields, f.name, &n)
		if err != nil {
			return err
		}
		if ok {
			v := keyopts.Off
			if n != nil {
				v = strconv.FormatInt(*n, 10)
			}
			*f.dst = &v
		}
	}
	return nil
}
