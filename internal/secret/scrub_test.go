package secret

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestRedactURL(t *testing.T) {
	for raw, want := range map[string]string{
		"https://h/mcp":                           "https://h/mcp",
		"https://h/mcp?api_key=K3Y-123&v=1":       "https://h/mcp?api_key=[REDACTED]&v=[REDACTED]",
		"https://user:pass@h:8443/p?x=1&x=2#frag": "https://***@h:8443/p?x=[REDACTED]&x=[REDACTED]",
		"https://tok@h/p":                         "https://***@h/p",
		"http://h/a%2Fb?q=a%20b":                  "http://h/a%2Fb?q=[REDACTED]",
		"://bad":                                  "(unparsable URL)",
	} {
		got := RedactURL(raw)
		if got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", raw, got, want)
		}
		if strings.Contains(got, "K3Y") || strings.Contains(got, "pass") || strings.Contains(got, "tok@") {
			t.Errorf("RedactURL(%q) = %q leaks", raw, got)
		}
	}
}

func TestScrubber(t *testing.T) {
	const raw = "https://alice:pw-5ecret@api.example/mcp?api_key=key-7a7a7a&v=1"
	var sc Scrubber
	sc.AddURL(raw)
	sc.AddHeaderValue("Bearer tok-abcdef123")
	sc.Add("sec\"ret/value", "abc") // abc: too short to scrub
	u, _ := url.Parse(raw)
	for _, text := range []string{
		fmt.Sprintf("Post %q: dial tcp: connection refused", raw),
		fmt.Sprintf("Post %q: EOF", u.String()),
		"server said: bad key key-7a7a7a for alice (pw-5ecret)",
		"invalid token tok-abcdef123; header was Bearer tok-abcdef123",
		`{"data":"sec\"ret/value","raw":"sec"ret/value"}`,
		"key%2D7a7a7a",
	} {
		got := sc.Scrub(text)
		for _, leak := range []string{"pw-5ecret", "key-7a7a7a", "tok-abcdef123", `sec\"ret`, "sec\"ret/value"} {
			if strings.Contains(got, leak) {
				t.Errorf("Scrub(%q) = %q still contains %q", text, got, leak)
			}
		}
		if !strings.Contains(got, Redacted) && !strings.Contains(text, "%2D") {
			t.Errorf("Scrub(%q) = %q redacted nothing", text, got)
		}
	}
	if got := sc.Scrub("abc v=1 api.example"); got != "abc v=1 api.example" {
		t.Errorf("short values and plain text changed: %q", got)
	}
	masked := strings.Replace(raw, "pw-5ecret", "***", 1) // how net/http quotes it
	if got := sc.Scrub("Post " + masked + ": EOF"); got != "Post https://***@api.example/mcp?api_key=[REDACTED]&v=[REDACTED]: EOF" {
		t.Errorf("net/http's form of the URL: %q", got)
	}
	if got := sc.Scrub(fmt.Sprintf("GET %q", raw)); !strings.Contains(got, "api.example/mcp?api_key=") {
		t.Errorf("the URL itself should stay recognisable: %q", got)
	}
	base := errors.New("Post " + raw + ": refused")
	err := sc.Error(fmt.Errorf("initialize: %w", base))
	if strings.Contains(err.Error(), "pw-5ecret") || !errors.Is(err, base) {
		t.Errorf("Error: %q, chain kept %v", err, errors.Is(err, base))
	}
	if sc.Error(nil) != nil {
		t.Error("Error(nil) != nil")
	}
	call := sc.Clone()
	call.Add("per-call-token")
	if got := call.Scrub("per-call-token key-7a7a7a"); got != "[REDACTED] [REDACTED]" {
		t.Errorf("clone: %q", got)
	}
	if got := sc.Scrub("per-call-token"); got != "per-call-token" {
		t.Errorf("Add on a clone changed the original: %q", got)
	}
	var zero Scrubber
	if zero.Scrub("x") != "x" {
		t.Error("zero Scrubber changed text")
	}
}

// FuzzRedactURL: whatever the URL, the redacted form, parsed again, carries
// no user info and no query value but the marker.
func FuzzRedactURL(f *testing.F) {
	f.Add("https://u:p@h/p?a=1&b=%20x#f")
	f.Add("http://h?;=x")
	f.Add("//user@host/path?k")
	f.Add("?AAA=?AAA")
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		out := RedactURL(raw)
		if err != nil {
			if out != "(unparsable URL)" {
				t.Fatalf("RedactURL(%q) = %q for an unparsable URL", raw, out)
			}
			return
		}
		r, err := url.Parse(out)
		if err != nil {
			t.Fatalf("RedactURL(%q) = %q does not parse: %v", raw, out, err)
		}
		if r.User != nil {
			if _, hasPass := r.User.Password(); hasPass || r.User.Username() != RedactedUserinfo {
				t.Fatalf("RedactURL(%q) = %q keeps user info", raw, out)
			}
		}
		if u.User != nil && u.Host != "" && r.User == nil {
			t.Fatalf("RedactURL(%q) = %q hides that the URL had user info", raw, out)
		}
		for _, vs := range r.Query() {
			for _, v := range vs {
				if v != Redacted {
					t.Fatalf("RedactURL(%q) = %q keeps the query value %q", raw, out, v)
				}
			}
		}
		if r.Fragment != "" {
			t.Fatalf("RedactURL(%q) = %q keeps the fragment", raw, out)
		}
	})
}

func TestRedactURI(t *testing.T) {
	for in, want := range map[string]string{
		"file:///srv/doc.md":              "file:///srv/doc.md",
		"test://doc?token=abc123":         "test://doc?token=" + Redacted,
		"https://u:pw@host/x":             "https://" + RedactedUserinfo + "@host/x",
		"https://host/x#access_token=abc": "https://host/x",
	} {
		if got := RedactURI(in); got != want {
			t.Errorf("RedactURI(%q) = %q, want %q", in, got, want)
		}
	}
}
