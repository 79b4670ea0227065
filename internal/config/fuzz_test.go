package config

import (
	"errors"
	"os"
	"testing"
)

func FuzzParse(f *testing.F) {
	data, err := os.ReadFile(fixture)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, false)
	for _, s := range []string{
		`{}`,
		`{"mcpServers": {"a": {"type": "http", "url": "$URL", "headers": {"A": "$V", "a": "x"}}}}`,
		`{"mcpServers": {"a": {"command": "x", "routing": {"priority": 1e400}, "session_init_timeout": null}}}`,
		`{"mcpServers": {"": {"transport": "sse"}}, "guardrails": {"allowed_tools": []}, "inbound": {"auth": {"mode": "jwt"}}}`,
		`{"mcpServers": {"t": {"command": "x", "task_toolsets": [{"name": "n", "submit_tool": "a", "status_tool": "a", "cancel_tool": "c"}]}}}`,
		`{"policy": {"rules": [{"name": "r", "tool": "*_x", "methods": ["prompts/get"], "condition": "args.a.b[0] > 1 && has(args.c)", "effect": "deny"}], "authzen": {"url": "http://127.0.0.1:1/x", "timeout_ms": 10}}}`,
	} {
		f.Add([]byte(s), false)
	}
	for _, s := range []string{
		"mcpServers:\n  a:\n    command: npx\n    args: [-y, x]\n",
		"mcpServers:\n  b: &b {type: http, url: 'http://h'}\n  c: *b\n",
		"x: &a [*a]\n",
		"mcpServers: {a: {session_init_timeout: .nan}}\n",
		"mcpServers:\n  a:\n    <<: {command: x}\n    routing: {mode: off}\n",
	} {
		f.Add([]byte(s), true)
	}
	env := envOf(map[string]string{"URL": "http://h", "V": "v\n"})
	f.Fuzz(func(t *testing.T, data []byte, isYAML bool) {
		name := "c.json"
		if isYAML {
			name = "c.yaml"
		}
		cfg, err := Parse(data, LoadOptions{Filename: name, LookupEnv: env})
		var se *SyntaxError
		if errors.As(err, &se) && cfg != nil {
			t.Fatal("a syntax error must not return a config")
		}
		if cfg == nil {
			if err == nil {
				t.Fatal("nil config without an error")
			}
			return
		}
		for _, s := range cfg.Servers {
			if s.Name == "" {
				t.Fatal("server with an empty name")
			}
			switch s.Type {
			case TypeStdio, TypeHTTP, TypeSSE:
			default:
				t.Fatalf("server %q has type %q", s.Name, s.Type)
			}
			_ = s.Fingerprint()
		}
	})
}
