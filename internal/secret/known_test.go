package secret

import (
	"strings"
	"testing"
)

// Redact covers every occurrence of every value, overlapping ones as one.
func TestScrubberRedact(t *testing.T) {
	var sc Scrubber
	sc.Add("secret-one", "one-two-three", "abcdef", "abcdefgh")
	for in, want := range map[string]string{
		"a secret-one here":             "a [REDACTED] here",
		"secret-one-two-three":          "[REDACTED]", // overlapping: one span
		"xabcdefghx abcdefx":            "x[REDACTED]x [REDACTED]x",
		"abcdeabcdef":                   "abcde[REDACTED]",
		"nothing to see":                "nothing to see",
		"secret-onsecret-one":           "secret-on[REDACTED]",
		"abcdefabcdef, then secret-one": "[REDACTED], then [REDACTED]",
	} {
		got, n := sc.Redact(in)
		if got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
		if n != strings.Count(want, Redacted) {
			t.Errorf("Redact(%q) counted %d", in, n)
		}
	}
	var none *Scrubber
	if got, n := none.Redact("abcdef"); got != "abcdef" || n != 0 {
		t.Errorf("a nil Scrubber redacts: %q %d", got, n)
	}
}

// The quadratic-redaction attack on known values: a long value that the
// text nearly matches everywhere, or many values that are suffixes of
// each other, cost a bounded number of steps per byte of a 2 MB text —
// counted, not timed.
func TestScrubberRedactLinear(t *testing.T) {
	const size = 2 << 20
	many := make([]string, 0, 1000)
	for l := MinScrubLen; l < MinScrubLen+1000; l++ {
		many = append(many, strings.Repeat("a", l))
	}
	for name, tc := range map[string]struct {
		values []string
		text   string
	}{
		"a long near miss":     {[]string{strings.Repeat("a", 100000) + "b"}, strings.Repeat("a", size)},
		"nested suffixes":      {many, strings.Repeat("a", size)},
		"alternating prefixes": {[]string{"abababababababababab!"}, strings.Repeat("ab", size/2)},
	} {
		var sc Scrubber
		sc.Add(tc.values...)
		var work int
		out, _ := sc.redact(tc.text, &work)
		if work > 4*len(tc.text) {
			t.Errorf("%s: %d steps for %d bytes (%.1f per byte), want at most 4 per byte", name, work, len(tc.text), float64(work)/float64(len(tc.text)))
		}
		if name == "nested suffixes" && out != Redacted {
			t.Errorf("%s: %d bytes left, want one [REDACTED]", name, len(out))
		}
	}
}

// FuzzScrubberRedact: no occurrence of a value survives, and the work
// stays linear.
func FuzzScrubberRedact(f *testing.F) {
	f.Add("secret-one", "xx secret-one yy", "abcdefg")
	f.Add("aaaaaa", "aaaaaaaaaaaaa", "aaaaab")
	f.Fuzz(func(t *testing.T, v1, text, v2 string) {
		var sc Scrubber
		sc.Add(v1, v2)
		var work int
		out, _ := sc.redact(text, &work)
		if work > 4*len(text)+4 {
			t.Fatalf("%d steps for %d bytes", work, len(text))
		}
		masked := strings.ReplaceAll(out, Redacted, "\x00")
		for _, v := range []string{v1, v2} {
			if len(v) >= MinScrubLen && !strings.Contains(v, "\x00") && strings.Contains(masked, v) {
				t.Fatalf("Redact(%q) with %q = %q: the value survives", text, v, out)
			}
		}
	})
}
