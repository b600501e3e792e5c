package keyopts

import (
	"strings"
	"unicode"
)

// MaxModels is the longest model allow-list a key may have.
const MaxModels = 1000

// maxModelIDLen matches the configuration's limit on a model id.
const maxModelIDLen = 256

// Models checks a model allow-list. nil means All Models and is returned as
// nil; an empty, non-nil list is rejected (a key that may use no model is of
// no use: disable it instead). Each id is trimmed and must be non-empty,
// without control characters or '#', and known when known is not nil.
// Duplicates are dropped, keeping the first.
func Models(ids []string, known func(id string) bool) ([]string, error) {
	if ids == nil {
		return nil, nil
	}
	if len(ids) == 0 {
		return nil, fieldErr(FieldModels, "the allow-list is empty; leave it unset for All Models")
	}
	out := make([]string, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	for i, id := range ids {
		id = strings.TrimSpace(id)
		switch {
		case id == "":
			return nil, fieldErr(FieldModels, "entry %d is empty", i+1)
		case len(id) > maxModelIDLen || strings.ContainsFunc(id, func(r rune) bool { return r == '#' || unicode.IsControl(r) }):
			return nil, fieldErr(FieldModels, "%s is not a model id", quote(id))
		case known != nil && !known(id):
			return nil, fieldErr(FieldModels, "unknown model %s", quote(id))
		case seen[id]:
			continue
		}
		seen[id] = true
		out = append(out, id)
	}
	if len(out) > MaxModels {
		return nil, fieldErr(FieldModels, "has %d distinct entries; at most %d are allowed", len(out), MaxModels)
	}
	return out, nil
}
