package api

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzPinPath: the admin pins route's path check accepts a server and a
// tool only when both are non-empty printable text within their bounds,
// and its error is a fixed text: it never repeats what it refused.
func FuzzPinPath(f *testing.F) {
	for _, s := range [][2]string{{"up", "read"}, {"", "read"}, {"up", ""}, {"up", "re\x00ad"}, {"u\u0085p", "read"},
		{"up", strings.Repeat("x", 129)}, {strings.Repeat("s", 257), "t"}, {"ünïcode", "tööl"}, {"up", "\xff"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, server, tool string) {
		err := pinPath(server, tool)
		ok := printable(server, 256) && printable(tool, 128)
		if (err == nil) != ok {
			t.Fatalf("pinPath(%q, %q) = %v, want ok %v", server, tool, err, ok)
		}
		if err != nil && err.Error() != "the server in the path must be printable text of 1 to 256 bytes" &&
			err.Error() != "the tool in the path must be printable text of 1 to 128 bytes" {
			t.Fatalf("the error is not one of the two fixed texts: %v", err)
		}
	})
}

// printable is the rule pinPath holds a segment to.
func printable(s string, max int) bool {
	if s == "" || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r < 0xa0 {
			return false
		}
	}
	return true
}
