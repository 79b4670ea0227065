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
		"https://user:pass@h:8443/p?x=1&x=2#frag": "https://[REDACTED]@h:8443/p?x=[REDACTED]&x=[REDACTED]",
		"https://tok@h/p":                         "https://[REDACTED]@h/p",
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
	var zero Scrubber
	if zero.Scrub("x") != "x" {
		t.Error("zero Scrubber changed text")
	}
}
