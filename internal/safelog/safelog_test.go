package safelog

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/go-hclog"
)

func TestWriterText(t *testing.T) {
	for in, want := range map[string]string{
		"plain line\n":                         "plain line\n",
		"héllo ✓\n":                            "héllo ✓\n",
		"\x1b[31mred\x1b]0;title\x07\n":        `\x1b[31mred\x1b]0;title\x07` + "\n",
		"tab\there\rcr\nforged [ERROR] line\n": `tab\there\rcr\nforged [ERROR] line` + "\n",
		"del\x7f c1\u009b31m bad\xff":          `del\x7f c1\u009b31m bad\xff`,
	} {
		var b bytes.Buffer
		n, err := Writer(&b, false).Write([]byte(in))
		if err != nil || n != len(in) || b.String() != want {
			t.Errorf("%q: wrote %q (%d, %v), want %q", in, b.String(), n, err, want)
		}
	}
}

// hclog's JSON output escapes C0 itself; DEL and C1 are escaped here and the
// line stays valid JSON with the same text.
func TestWriterJSON(t *testing.T) {
	var b bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{JSONFormat: true, Output: Writer(&b, true)})
	msg := "\x1b[31mred\x1b]0;title\x07 del\x7f c1\u009b"
	log.Info(msg, "tool", "x\u0085y")
	line := b.Bytes()
	if bytes.ContainsAny(line[:len(line)-1], "\x1b\x07\x7f\n") || bytes.Contains(line, []byte("\u009b")) || bytes.Contains(line, []byte("\u0085")) {
		t.Errorf("raw control in %q", line)
	}
	var v map[string]any
	if err := json.Unmarshal(line, &v); err != nil || v["@message"] != msg || v["tool"] != "x\u0085y" {
		t.Errorf("not the same JSON: %v %q", err, line)
	}
}

func FuzzWriter(f *testing.F) {
	for _, s := range []string{"a\n", "\x1b[0m", "\u009b\xff\x00", `{"a":"\u0007"}` + "\n"} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, in []byte, isJSON bool) {
		var b bytes.Buffer
		if n, err := Writer(&b, isJSON).Write(in); err != nil || n != len(in) {
			t.Fatalf("Write = %d, %v", n, err)
		}
		out := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		if !utf8.Valid(out) {
			t.Fatalf("invalid UTF-8 out: %q", out)
		}
		for _, r := range string(out) {
			if r < 0x20 || r == 0x7f || r >= 0x80 && r <= 0x9f {
				t.Fatalf("control %U left in %q", r, out)
			}
		}
		if isJSON && json.Valid(in) && !json.Valid(b.Bytes()) {
			t.Fatalf("valid JSON %q became %q", in, b.Bytes())
		}
	})
}
