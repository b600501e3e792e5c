package dashboard

import (
	"net/url"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/store"
)

// tokenLimitsForm is the key form's token limits as typed: a number of
// tokens per minute and per UTC day; empty is Off (the plan's default).
type tokenLimitsForm struct {
	TPMLimit     string
	TokensPerDay string
}

func tokenLimitsFormOf(k store.Key) tokenLimitsForm {
	return tokenLimitsForm{TPMLimit: tokensText(k.TPMLimit), TokensPerDay: tokensText(k.TokensPerDay)}
}

func parseTokenLimitsForm(v url.Values) tokenLimitsForm {
	return tokenLimitsForm{
		TPMLimit:     strings.TrimSpace(v.Get(keyopts.FieldTPMLimit)),
		TokensPerDay: strings.TrimSpace(v.Get(keyopts.FieldTokensPerDay)),
	}
}

// patch sets p's token limits that differ from was's (all on a create
// form, where was is nil).
func (f tokenLimitsForm) patch(was *tokenLimitsForm, p *keyopts.Patch) {
	if t := offIfEmpty(f.TPMLimit); was == nil || t != offIfEmpty(was.TPMLimit) {
		p.TPMLimit = &t
	}
	if t := offIfEmpty(f.TokensPerDay); was == nil || t != offIfEmpty(was.TokensPerDay) {
		p.TokensPerDay = &t
	}
}

func offIfEmpty(s string) string {
	if s == "" {
		return keyopts.Off
	}
	return s
}

func tokensText(n *int64) string {
	if n == nil {
		return ""
	}
	return strconv.FormatInt(*n, 10)
}
