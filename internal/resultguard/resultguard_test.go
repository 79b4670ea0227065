package resultguard

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

const ghToken = "ghp_0123456789abcdefghijABCDEFGHIJklmn"

// Known values and token shapes go from text, embedded resources and
// structuredContent; everything else is kept as it came.
func TestRedact(t *testing.T) {
	var sc secret.Scrubber
	sc.Add("s3cr3t-header-value")
	raw := `{"content":[{"type":"text","text":"key s3cr3t-header-value and ` + ghToken + ` <b>"},` +
		`{"type":"resource","resource":{"uri":"file:///a","text":"also ` + ghToken + `"}},{"type":"image","data":"aGk=","mimeType":"image/png"}],` +
		`"structuredContent":{"nested":[{"t":"s3cr3t-header-value"}],"n":1.50},"isError":false,"_meta":{"x":1}}`
	r, err := Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if n := r.Redact(&sc); n != 4 {
		t.Errorf("Redact replaced %d, want 4", n)
	}
	out, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"s3cr3t-header-value", ghToken} {
		if strings.Contains(string(out), s) {
			t.Errorf("redacted result still holds %q: %s", s, out)
		}
	}
	for _, s := range []string{`"text":"key [REDACTED] and [REDACTED] <b>"`, `"data":"aGk="`, `"n":1.50`, `"_meta":{"x":1}`, `"isError":false`} {
		if !strings.Contains(string(out), s) {
			t.Errorf("redacted result lacks %s: %s", s, out)
		}
	}
}

// Truncation keeps a valid result: text in order up to the budget, the
// cut at a rune boundary, later blocks and structuredContent dropped.
func TestTruncate(t *testing.T) {
	raw := `{"content":[{"type":"text","text":"héllo"},{"type":"image","data":"aGk=","mimeType":"image/png"},{"type":"text","text":"wörld-wörld"},{"type":"text","text":"gone"}],"structuredContent":{"a":1}}`
	r, err := Parse(json.RawMessage(raw))
	if err != nil {
		t.Fatal(err)
	}
	if c := r.Chars(); c != 5+11+4+len(`{"a":1}`) {
		t.Errorf("Chars = %d", c)
	}
	if kept := r.Truncate(8); kept != 8 {
		t.Errorf("kept %d, want 8", kept)
	}
	r.Append(TextBlock(Marker(27, 8, "result_guards.max_result_chars", true, "")))
	out, _ := r.JSON()
	var got struct {
		Content []struct {
			Type, Text string
		}
		StructuredContent json.RawMessage
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if len(got.Content) != 4 || got.Content[2].Text != "wör" || got.Content[1].Type != "image" || got.StructuredContent != nil {
		t.Errorf("truncated = %s", out)
	}
	if m := got.Content[3].Text; m != "[mcp-mux: result truncated: 27 characters, 8 kept; structuredContent dropped; set by result_guards.max_result_chars]" {
		t.Errorf("marker = %q", m)
	}
}

func TestHint(t *testing.T) {
	for meta, want := range map[string]int{
		`{"anthropic/maxResultSizeChars":25000}`: 25000, `{"anthropic/maxResultSizeChars":999}`: 0,
		`{"anthropic/maxResultSizeChars":2.5e4}`: 0, `{"anthropic/maxResultSizeChars":"25000"}`: 0, `{}`: 0, ``: 0, `[`: 0,
	} {
		if got := Hint(json.RawMessage(meta)); got != want {
			t.Errorf("Hint(%s) = %d, want %d", meta, got, want)
		}
	}
}

// FuzzGuard: any JSON either is not a result or comes out redacted and
// truncated as valid JSON within its budget.
func FuzzGuard(f *testing.F) {
	for _, s := range []string{`{"content":[{"type":"text","text":"` + ghToken + `"}]}`, `{"content":[]}`, `{"content":[null,{"resource":{"text":"ab"}}],"structuredContent":[1,"x"]}`,
		`{"content":[{"type":"text","text":"ünïcödé"}],"structuredContent":null}`, `[]`, `{"content":{}}`} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, in string, budget int) {
		r, err := Parse(json.RawMessage(in))
		if err != nil {
			return
		}
		r.Redact(nil)
		budget = max(budget%64, 0)
		kept := r.Truncate(budget)
		if c := r.Chars(); c > budget || kept > budget {
			t.Fatalf("%q cut to %d: %d characters left, %d kept", in, budget, c, kept)
		}
		out, err := r.JSON()
		if err != nil || !json.Valid(out) {
			t.Fatalf("%q: %s, %v", in, out, err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", out, err)
		}
		for _, b := range back.content {
			if s, _ := textOf(b); strings.Contains(s, ghToken) {
				t.Fatalf("token kept: %s", out)
			}
		}
	})
}
