package secret

import (
	"strings"
	"testing"
)

// Every known format is found at a word boundary, whole, and nothing
// that merely looks alike is touched.
func TestRedactTokens(t *testing.T) {
	jwt := "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJlLXZhbHVl"
	pem := "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
	for in, want := range map[string]string{
		"token ghp_0123456789abcdefghijABCDEFGHIJklmn here":                 "token [REDACTED] here",
		"gho_0123456789abcdefghijAB,ghs_0123456789abcdefghijAB":             "[REDACTED],[REDACTED]",
		"github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuv":             "[REDACTED]",
		"key=AKIAIOSFODNN7EXAMPLE;":                                         "key=[REDACTED];",
		"slack xoxb-1234567890-abcdefghij":                                  "slack [REDACTED]",
		`{"k":"sk_live_4eC39HqLyjWDarjtT1zdp7dc"}`:                          `{"k":"[REDACTED]"}`,
		"AIzaSyA-0123456789abcdefghijklmnopqrstu":                           "[REDACTED]",
		"sk-ant-api03-0123456789abcdefghij_klmno":                           "[REDACTED]",
		"sk-proj-0123456789abcdefghijklmnop":                                "[REDACTED]",
		"auth: " + jwt + " end":                                             "auth: [REDACTED] end",
		"before\n" + pem + "\nafter":                                        "before\n[REDACTED]\nafter",
		"-----BEGIN PRIVATE KEY-----\nMIIE cut":                             "[REDACTED]",
		"Authorization: Bearer abcdefghijklmnop.qrstuvwx/yz=":               "Authorization: Bearer [REDACTED]",
		"a task-0123456789abcdefghijklmnop and xghp_0123456789abcdefghijkl": "a task-0123456789abcdefghijklmnop and xghp_0123456789abcdefghijkl",
		"ghp_short, AKIA123, Bearer token, eyJ.eyJ.x":                       "ghp_short, AKIA123, Bearer token, eyJ.eyJ.x",
		"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----":      "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
		"plain text, nothing secret":                                        "plain text, nothing secret",
	} {
		got, n := RedactTokens(in)
		if got != want {
			t.Errorf("RedactTokens(%q) =\n%q\nwant\n%q", in, got, want)
		}
		if wantN := strings.Count(want, Redacted); n != wantN {
			t.Errorf("RedactTokens(%q) counted %d, want %d", in, n, wantN)
		}
	}
}

// The quadratic-redaction attack: 2 MB texts made of prefixes, near
// misses and unterminated blocks cost a bounded number of bytes read per
// byte — counted, not timed.
func TestRedactTokensLinear(t *testing.T) {
	const size = 2 << 20
	for name, unit := range map[string]string{
		"ghp_":              "ghp_",
		"ghp_ near misses":  "ghp_0123456789abcdef ",
		"eyJ":               "eyJ",
		"eyJ.":              "eyJ.",
		"jwt-like":          "eyJabcdefghijk.eyJabcdefghijk",
		"sk-":               "sk-",
		"AKIA":              "AKIA",
		"Bearer":            "Bearer ",
		"pem begin":         "-----BEGIN ",
		"pem no end":        "-----BEGIN RSA PRIVATE KEY-----\nxx",
		"pem header no key": "-----BEGIN " + strings.Repeat("A", 60),
		"xox":               "xoxb-",
		"letters":           "a",
	} {
		in := strings.Repeat(unit, size/len(unit))
		var work int
		out, _ := redactTokens(in, &work)
		if work > 16*len(in) {
			t.Errorf("%s: %d bytes read for %d bytes of text (%.1f per byte), want at most 16 per byte", name, work, len(in), float64(work)/float64(len(in)))
		}
		if len(out) > len(in) {
			t.Errorf("%s: redacted text grew from %d to %d bytes", name, len(in), len(out))
		}
	}
}

// FuzzRedactTokens: any text is read in bounded work, never grows, and
// keeps no GitHub token of the classic form.
func FuzzRedactTokens(f *testing.F) {
	for _, s := range []string{"ghp_0123456789abcdefghijABCDEFGHIJklmn", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.sig",
		"-----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY-----", "Bearer abcdefghijklmnopqrstuvwxyz", "sk-sk-sk-", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var work int
		out, n := redactTokens(in, &work)
		if work > 16*len(in)+16 {
			t.Fatalf("%d bytes read for %d bytes of text", work, len(in))
		}
		if len(out) > len(in) || (n == 0 && out != in) {
			t.Fatalf("RedactTokens(%q) = %q, %d", in, out, n)
		}
	})
}
