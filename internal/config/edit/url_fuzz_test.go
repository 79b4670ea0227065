package edit

import (
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// FuzzMaskURL: splitting a URL loses nothing, masking is idempotent, the
// masked form keeps no user info, and the masked form of a stored URL
// always restores to it.
func FuzzMaskURL(f *testing.F) {
	for _, s := range []string{"https://h/mcp", "https://u:p@h/a@b?token=x&q=1#f", "$X", "://@?&=#", "http://h?api_key=%zz&token"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, ok := splitURL(s)
		if !ok {
			if maskURL(rawdoc.Str(s)).Text != s {
				t.Fatalf("%q is not a URL but was masked", s)
			}
			return
		}
		if u.String() != s {
			t.Fatalf("split %q rebuilds as %q", s, u.String())
		}
		m := maskURL(rawdoc.Str(s)).Text
		if again := maskURL(rawdoc.Str(m)).Text; again != m {
			t.Fatalf("mask of %q is %q, masked again %q", s, m, again)
		}
		if mu, _ := splitURL(m); mu.at && mu.userinfo != "" && mu.userinfo != Masked {
			t.Fatalf("mask of %q keeps user info: %q", s, m)
		}
		got, err := restoreURL("url", rawdoc.Str(m), rawdoc.Str(s))
		if err != nil || got.Text != s {
			t.Fatalf("restoring %q against %q: %v %v", m, s, got, err)
		}
	})
}
