package bounds

import (
	"strings"
	"testing"
)

func TestText(t *testing.T) {
	for _, tc := range []struct {
		v    string
		ok   bool
		want string
	}{
		{"thread-1", true, ""},
		{"a b~", true, ""},
		{strings.Repeat("x", 255), true, ""},
		{strings.Repeat("x", 256), false, "X is 256 bytes long; mcp-mux accepts at most 255"},
		{"a\nb", false, "X must be printable text"},
		{"é", false, "X must be printable text"},
		{"\x7f", false, "X must be printable text"},
	} {
		err := Text("X", tc.v, 255)
		if (err == nil) != tc.ok {
			t.Fatalf("Text(%q) = %v, want ok=%v", tc.v, err, tc.ok)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Text(%q) = %q, want prefix %q", tc.v, err, tc.want)
			}
			if tc.v != "" && strings.Contains(err.Error(), tc.v) && len(tc.v) > 1 {
				t.Errorf("error echoes the value: %q", err)
			}
		}
	}
}

func TestPrintable(t *testing.T) {
	for v, ok := range map[string]bool{"alice": true, "Zoë 山田": true, "a\x00": false, "\xff": false, "a\u0085b": false, "a\x7f": false} {
		if err := Printable("user", v, 16); (err == nil) != ok {
			t.Errorf("Printable(%q) = %v, want ok=%v", v, err, ok)
		}
	}
	if err := Printable("user", strings.Repeat("é", 9), 16); err == nil {
		t.Error("accepted 18 bytes past 16")
	}
}

func TestLabelAndClip(t *testing.T) {
	if Label("a_b", true) != "a_b" || Label("zzz", false) != Unknown {
		t.Fatal("Label")
	}
	if got := Clip("short", 10); got != "short" {
		t.Fatalf("Clip short = %q", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got := Clip(long, 11)
	if !strings.HasSuffix(got, "…(200 bytes)") || !strings.HasPrefix(got, strings.Repeat("é", 5)) || len(got) > 11+len("…(200 bytes)") {
		t.Fatalf("Clip = %q", got)
	}
}

func FuzzText(f *testing.F) {
	f.Add("thread", 8)
	f.Add("\x00\xff", 1)
	f.Fuzz(func(t *testing.T, v string, max int) {
		if max < 0 || max > 1<<20 {
			return
		}
		if err := Text("F", v, max); err == nil && len(v) > max {
			t.Fatalf("accepted %d bytes past %d", len(v), max)
		}
		if c := Clip(v, max); len(c) > max+32 {
			t.Fatalf("Clip kept %d bytes past %d", len(c), max)
		}
	})
}
