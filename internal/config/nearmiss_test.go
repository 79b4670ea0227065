package config

import (
	"strings"
	"testing"
)

func TestLikelyKey(t *testing.T) {
	for key, want := range map[string]string{
		"enabeld":          "enabled",
		"Enabled":          "enabled",
		"tool_call_timout": "tool_call_timeout",
		"comand":           "command",
		"urls":             "url",
		"cwd":              "",
		"mcpServers":       "",
		"middlewares":      "",
		"session_scop":     "session_scope",
	} {
		known := serverKeys
		if strings.HasPrefix(key, "mcp") {
			known = topLevelKeys
		}
		if got := likelyKey(key, known); got != want {
			t.Errorf("likelyKey(%q) = %q, want %q", key, got, want)
		}
	}
	if got := likelyKey("mcpServer", topLevelKeys); got != "mcpServers" {
		t.Errorf("likelyKey(mcpServer) = %q", got)
	}
}

func TestNearMissesWarn(t *testing.T) {
	doc := `{"mcpServer": {}, "mcpServers": {"a": {"command": "x", "enabeld": false, "tool_call_timout": 5, "cwd": "/tmp",
	  "env": {"TOKEN": "$MUX_TEST_UNSET_VAR", "SET": "$MUX_TEST_SET"}}},
	  "tool_search": {"enabeld": true}}`
	cfg, err := Parse([]byte(doc), LoadOptions{Filename: "c.json", LookupEnv: func(k string) (string, bool) {
		if k == "MUX_TEST_SET" {
			return "secret-value-123", true
		}
		return "", false
	}})
	if err == nil || !strings.Contains(err.Error(), `tool_search.enabeld: unknown key; did you mean "enabled"?`) {
		t.Errorf("strict block: err = %v", err)
	}
	var all []string
	for _, w := range cfg.Warnings {
		all = append(all, w.Format("c.json"))
	}
	text := strings.Join(all, "\n")
	for _, want := range []string{
		`mcpServer: unknown top-level key, kept but not used; did you mean "mcpServers"?`,
		`a:enabeld: unknown key, kept but not used; did you mean "enabled"?`,
		`a:tool_call_timout: unknown key, kept but not used; did you mean "tool_call_timeout"?`,
		`a:env.TOKEN: $MUX_TEST_UNSET_VAR is not set`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("warnings lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "cwd") || strings.Contains(text, "secret-value-123") || strings.Contains(text, "MUX_TEST_SET") {
		t.Errorf("warnings name a DeerFlow key, a value or a set variable:\n%s", text)
	}
}
