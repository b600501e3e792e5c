package oaierror

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClipNeverCutsACharacterInHalf(t *testing.T) {
	tests := []struct {
		in   string
		max  int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"abcdefghijk", 10, "abcdefghij…"},
		{"ab✓cd", 3, "ab…"},  // ✓ is 3 bytes starting at byte 2
		{"ab✓cd", 4, "ab…"},  // inside ✓: back to its start
		{"ab✓cd", 5, "ab✓…"}, // just after ✓
		{strings.Repeat("é", 60), 101, strings.Repeat("é", 50) + "…"},
	}
	for _, tt := range tests {
		got := Clip(tt.in, tt.max)
		if got != tt.want {
			t.Errorf("Clip(%q, %d) = %q, want %q", tt.in, tt.max, got, tt.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Clip(%q, %d) = %q is not valid UTF-8", tt.in, tt.max, got)
		}
	}
}
