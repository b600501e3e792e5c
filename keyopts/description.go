package keyopts

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxDescriptionLen is the longest description, in characters (runes).
const MaxDescriptionLen = 200

// Description trims s and checks that it is 1–MaxDescriptionLen characters of
// valid UTF-8 with no control characters or line breaks.
func Description(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fieldErr(FieldDescription, "is not valid UTF-8")
	}
	s = strings.TrimSpace(s)
	n := utf8.RuneCountInString(s)
	if n == 0 {
		return "", fieldErr(FieldDescription, "is required")
	}
	if n > MaxDescriptionLen {
		return "", fieldErr(FieldDescription, "is %d characters long; at most %d are allowed", n, MaxDescriptionLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return "", fieldErr(FieldDescription, "must not contain control characters or line breaks")
		}
	}
	return s, nil
}
