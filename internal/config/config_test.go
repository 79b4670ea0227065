package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const fixture = "testdata/deerflow-extensions_config.example.json"

// envOf returns a LookupEnv backed by m, so tests never read the real
// environment.
func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// load writes content to a file called name in a temp dir and loads it.
func load(t *testing.T, name, content string, env map[string]string) (*Config, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return Load(path, LoadOptions{LookupEnv: envOf(env)})
}

// mustLoad loads a JSON config that must have no top-level problems.
func mustLoad(t *testing.T, content string, env map[string]string) *Config {
	t.Helper()
	cfg, err := load(t, "extensions_config.json", content, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return cfg
}

// servers wraps server JSON objects into a config file.
func servers(entries ...string) string {
	return `{"mcpServers": {` + strings.Join(entries, ",") + `}}`
}

func names(ss []*Server) []string {
	out := []string{}
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func TestDeerFlowFixture(t *testing.T) {
	cfg, err := Load(fixture, LoadOptions{LookupEnv: envOf(map[string]string{"GITHUB_TOKEN": "ghp_x"})})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if got, want := names(cfg.Servers), []string{"github", "openviking", "postgres", "long-running-reports"}; !reflect.DeepEqual(got, want) {
		t.Errorf("servers = %v, want %v", got, want)
	}
	for _, s := range cfg.Servers {
		if s.Enabled {
			t.Errorf("server %s enabled, want disabled", s.Name)
		}
	}
	if len(cfg.Invalid) != 0 || len(cfg.Warnings) != 0 {
		t.Errorf("invalid = %v, warnings = %v", cfg.Invalid, cfg.Warnings)
	}
	if want := []string{"my_package.mcp.auth:build_auth_interceptor"}; !reflect.DeepEqual(cfg.Interceptors, want) {
		t.Errorf("interceptors = %v", cfg.Interceptors)
	}
	if len(cfg.Extra) != 2 || string(cfg.Extra["middlewares"]) != "[]" || string(cfg.Extra["skills"]) != "{}" {
		t.Errorf("extra = %v", cfg.Extra)
	}

	gh := cfg.Server("github")
	if gh.Type != TypeStdio || gh.Command != "npx" || gh.Env["GITHUB_TOKEN"].Reveal() != "ghp_x" ||
		gh.SessionInitTimeout != 60*time.Second || gh.ToolCallTimeout != 60*time.Second || !gh.ToolNamePrefix {
		t.Errorf("github = %+v", gh)
	}
	if !strings.Contains(string(gh.Raw), `"GITHUB_TOKEN":"$GITHUB_TOKEN"`) {
		t.Errorf("raw should keep the placeholder: %s", gh.Raw)
	}
	ov := cfg.Server("openviking")
	if ov.Type != TypeHTTP || ov.URL != "http://127.0.0.1:1933/mcp" || ov.Headers["X-API-Key"].Reveal() != "" {
		t.Errorf("openviking = %+v", ov)
	}
	pg := cfg.Server("postgres")
	if want := (Routing{Mode: "prefer", Priority: 50, Keywords: []string{"database", "SQL", "table", "订单", "用户"}}); !reflect.DeepEqual(pg.Routing, want) {
		t.Errorf("postgres routing = %+v", pg.Routing)
	}
	if got, want := pg.ToolRouting("query"), (Routing{Mode: "prefer", Priority: 100, Keywords: []string{"查库", "订单表", "指标"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("postgres query routing = %+v", got)
	}
	lr := cfg.Server("long-running-reports")
	if want := []TaskToolset{{Name: "report-generation", SubmitTool: "submit_report", StatusTool: "get_report_status", CancelTool: "cancel_report"}}; !reflect.DeepEqual(lr.TaskToolsets, want) {
		t.Errorf("task toolsets = %+v", lr.TaskToolsets)
	}

	// Defaults of the mux blocks, which the fixture does not set.
	g, ts, tasks, st, in := defaultBlocks()
	if !reflect.DeepEqual(cfg.Guardrails, g) || !reflect.DeepEqual(cfg.ToolSearch, ts) || cfg.Tasks != tasks || cfg.Store != st || !reflect.DeepEqual(cfg.Inbound, in) {
		t.Errorf("mux defaults differ: %+v %+v %+v %+v %+v", cfg.Guardrails, cfg.ToolSearch, cfg.Tasks, cfg.Store, cfg.Inbound)
	}
	if cfg.Guardrails.AllowedTools != nil || !cfg.Guardrails.Enabled || !cfg.Guardrails.FailClosed {
		t.Errorf("guardrails = %+v", cfg.Guardrails)
	}
}

func TestEnvExpansion(t *testing.T) {
	env := map[string]string{"TOKEN": "tok", "EMPTY": "", "{X}": "braced", "CMD": "node", "KW": "kw1", "NAME": "expanded-name"}
	cfg := mustLoad(t, `{
	  "mcpInterceptors": "$NAME",
	  "middlewares": ["$TOKEN"],
	  "mcpServers": {
	    "s": {
	      "command": "$CMD",
	      "args": ["$TOKEN", "$UNSET", "Bearer $TOKEN", "${X}", "plain", "$EMPTY", "$"],
	      "env": {"$TOKEN": "$TOKEN", "NESTED": "$UNSET"},
	      "description": "$TOKEN",
	      "routing": {"mode": "prefer", "keywords": ["$KW"]},
	      "autoApprove": "$TOKEN"
	    }
	  }
	}`, env)
	s := cfg.Server("s")
	if s == nil {
		t.Fatalf("invalid: %v", cfg.Invalid)
	}
	if want := []string{"tok", "", "Bearer $TOKEN", "braced", "plain", "", ""}; !reflect.DeepEqual(s.Args, want) {
		t.Errorf("args = %q, want %q", s.Args, want)
	}
	if s.Command != "node" || s.Description != "tok" || !reflect.DeepEqual(s.Routing.Keywords, []string{"kw1"}) {
		t.Errorf("server = %+v", s)
	}
	if v, ok := s.Env["$TOKEN"]; !ok || v.Reveal() != "tok" {
		t.Errorf("env keys must not be expanded: %v", s.Env)
	}
	if v := s.Env["NESTED"]; v.Reveal() != "" {
		t.Errorf("unset variable should expand to empty, got %q", v.Reveal())
	}
	if got := string(s.Extra["autoApprove"]); got != `"$TOKEN"` {
		t.Errorf("extras are kept verbatim: %s", got)
	}
	if got := string(cfg.Extra["middlewares"]); got != `["$TOKEN"]` {
		t.Errorf("top-level extras are kept verbatim: %s", got)
	}
	if !reflect.DeepEqual(cfg.Interceptors, []string{"expanded-name"}) {
		t.Errorf("interceptors = %v", cfg.Interceptors)
	}
}

func TestTransportAlias(t *testing.T) {
	tests := []struct {
		name, server string
		want         string // "" = invalid
		field        string
	}{
		{"default stdio", `{"command": "x"}`, TypeStdio, ""},
		{"transport alias", `{"transport": "http", "url": "http://h/mcp"}`, TypeHTTP, ""},
		{"type wins", `{"type": "sse", "transport": "http", "url": "http://h/sse"}`, TypeSSE, ""},
		{"empty type falls back", `{"type": "", "transport": "sse", "url": "http://h/sse"}`, TypeSSE, ""},
		{"null type falls back", `{"type": null, "transport": "http", "url": "http://h"}`, TypeHTTP, ""},
		{"unset var type falls back", `{"type": "$UNSET", "command": "x"}`, TypeStdio, ""},
		{"unsupported", `{"type": "websocket", "url": "ws://h"}`, "", "type"},
		{"case-sensitive", `{"type": "HTTP", "url": "http://h"}`, "", "type"},
		{"unsupported alias", `{"transport": "grpc"}`, "", "transport"},
		{"type not a string", `{"type": 1, "command": "x"}`, "", "type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := mustLoad(t, servers(`"s": `+tt.server), nil)
			if tt.want == "" {
				if len(cfg.Invalid) != 1 || cfg.Invalid[0].Problems[0].Field != tt.field {
					t.Fatalf("want a problem on %q, got %+v", tt.field, cfg.Invalid)
				}
				return
			}
			if len(cfg.Servers) != 1 || cfg.Servers[0].Type != tt.want {
				t.Fatalf("want type %s, got servers %+v invalid %+v", tt.want, cfg.Servers, cfg.Invalid)
			}
		})
	}
	cfg := mustLoad(t, servers(`"s": {"type": "websocket"}`), nil)
	if got := cfg.Invalid[0].Problems[0].Message; got != `unsupported transport type: "websocket"` {
		t.Errorf("message = %q", got)
	}
}

func TestSyntaxErrors(t *testing.T) {
	tests := []struct {
		name, file, content string
		line, col           int
	}{
		{"json bad value", "c.json", "{\n  \"mcpServers\": {\n    \"a\": x\n  }\n}\n", 3, 10},
		{"json trailing comma", "c.json", "{\n  \"a\": 1,\n}\n", 3, 1},
		{"json truncated", "c.json", "{\n  \"a\": [1,", 2, 11},
		{"json trailing data", "c.json", "{}\n{}", 2, 1},
		{"json empty", "c.json", "", 1, 1},
		{"yaml mapping in scalar", "c.yaml", "mcpServers:\n  a: b\n    c: d\n", 3, 0},
		{"yaml tab indent", "c.yml", "mcpServers:\n\ta: 1\n", 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.file, tt.content, nil)
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("want *SyntaxError, got %v", err)
			}
			if se.Line != tt.line || se.Column != tt.col || !strings.HasSuffix(se.File, tt.file) {
				t.Errorf("got %s:%d:%d (%s), want line %d col %d", se.File, se.Line, se.Column, se.Msg, tt.line, tt.col)
			}
			prefix := fmt.Sprintf("%s:%d:", se.File, tt.line)
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("Error() = %q, want prefix %q", err, prefix)
			}
		})
	}
}

func TestTopLevelShape(t *testing.T) {
	for _, content := range []string{`[]`, `"x"`, `null`} {
		if _, err := load(t, "c.json", content, nil); err == nil {
			t.Errorf("%s: want an error", content)
		}
	}
	_, err := load(t, "c.json", `{"mcpServers": []}`, nil)
	if ps := Problems(err); len(ps) != 1 || ps[0].Field != "mcpServers" {
		t.Errorf("mcpServers not an object: %v", err)
	}
	for _, content := range []string{`{}`, `{"mcpServers": null}`} {
		cfg := mustLoad(t, content, nil)
		if len(cfg.Servers) != 0 || len(cfg.Invalid) != 0 {
			t.Errorf("%s: %+v", content, cfg)
		}
	}
	cfg, err := load(t, "empty.yaml", "# only a comment\n", nil)
	if err != nil || len(cfg.Servers) != 0 {
		t.Errorf("empty YAML: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.json"), LoadOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestOrderPreserved(t *testing.T) {
	order := []string{"zeta", "alpha", "mike", "bravo", "yankee", "charlie", "xray", "delta", "whiskey", "echo", "victor", "foxtrot"}
	var js, ys []string
	for i, n := range order {
		js = append(js, fmt.Sprintf(`"%s": {"command": "c%d"}`, n, i))
		ys = append(ys, fmt.Sprintf("  %s:\n    command: c%d\n", n, i))
	}
	jcfg := mustLoad(t, servers(js...), nil)
	ycfg, err := load(t, "mux.yaml", "mcpServers:\n"+strings.Join(ys, ""), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []*Config{jcfg, ycfg} {
		if got := names(cfg.Servers); !reflect.DeepEqual(got, order) {
			t.Errorf("%s: order = %v, want %v", cfg.Path, got, order)
		}
		for i, s := range cfg.Servers {
			if s.Command != fmt.Sprintf("c%d", i) {
				t.Errorf("server %s command %s", s.Name, s.Command)
			}
		}
	}
}

func TestYAML(t *testing.T) {
	content := `# mcp-mux config
mcpInterceptors: audit
defaults: &http
  type: http
  headers:
    X-Token: $TOKEN
mcpServers:
  remote:
    <<: *http
    url: https://example.com/mcp
    routing:
      mode: off        # must stay the string "off" (YAML 1.1 would make it false)
      priority: 7
      keywords: [yes, no, on]
    session_init_timeout: .inf
  local:
    command: npx
    args: ["-y", 017, true]
    session_scope: shared
guardrails:
  allowed_tools: []
  denied_tools: [remote_drop]
`
	cfg, err := load(t, "mux.yml", content, map[string]string{"TOKEN": "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 0 {
		t.Errorf("want both servers invalid (.inf timeout, non-string args), got %v", names(cfg.Servers))
	}
	fields := map[string]string{}
	for _, se := range cfg.Invalid {
		for _, p := range se.Problems {
			fields[se.Name+":"+p.Field] = p.Message
		}
	}
	if fields["remote:session_init_timeout"] != "must be a finite number" || fields["local:args[1]"] == "" || fields["local:args[2]"] == "" || len(fields) != 3 {
		t.Errorf("problems = %v", fields)
	}

	content = strings.NewReplacer("session_init_timeout: .inf", "session_init_timeout: 1.5", `017, true`, `"017", "true"`).Replace(content)
	cfg, err = load(t, "mux.yaml", content, map[string]string{"TOKEN": "t0k"})
	if err != nil {
		t.Fatal(err)
	}
	r, l := cfg.Server("remote"), cfg.Server("local")
	if r == nil || l == nil {
		t.Fatalf("invalid: %+v", cfg.Invalid)
	}
	if r.Type != TypeHTTP || r.Headers["X-Token"].Reveal() != "t0k" || r.SessionInitTimeout != 1500*time.Millisecond {
		t.Errorf("remote = %+v", r)
	}
	if want := (Routing{Mode: "off", Priority: 7, Keywords: []string{"yes", "no", "on"}}); !reflect.DeepEqual(r.Routing, want) {
		t.Errorf("routing = %+v", r.Routing)
	}
	if !reflect.DeepEqual(l.Args, []string{"-y", "017", "true"}) || l.SessionScope != ScopeShared {
		t.Errorf("local = %+v", l)
	}
	if !reflect.DeepEqual(cfg.Interceptors, []string{"audit"}) || cfg.Guardrails.AllowedTools == nil || len(cfg.Guardrails.AllowedTools) != 0 {
		t.Errorf("interceptors %v guardrails %+v", cfg.Interceptors, cfg.Guardrails)
	}
	var defaults map[string]any
	if err := json.Unmarshal(cfg.Extra["defaults"], &defaults); err != nil || defaults["type"] != "http" {
		t.Errorf("extra defaults = %s (%v)", cfg.Extra["defaults"], err)
	}
}

func TestYAMLAliasBomb(t *testing.T) {
	content := "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		content += fmt.Sprintf("%s: &%s [*%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s, *%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	var se *SyntaxError
	if _, err := load(t, "bomb.yaml", content, nil); !errors.As(err, &se) {
		t.Fatalf("want a SyntaxError, got %v", err)
	}
	if _, err := load(t, "cycle.yaml", "a: &a [*a]\n", nil); !errors.As(err, &se) {
		t.Fatalf("want a SyntaxError for a cyclic alias, got %v", err)
	}
}

func TestDuplicateKeys(t *testing.T) {
	cfg := mustLoad(t, `{"mcpServers": {"a": {"command": "one"}, "b": {"command": "b", "command": "two"}, "a": {"command": "three"}}}`, nil)
	if got := names(cfg.Servers); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("order = %v", got)
	}
	if cfg.Server("a").Command != "three" || cfg.Server("b").Command != "two" {
		t.Errorf("last value should win: %+v", cfg.Servers)
	}
	want := []Problem{
		{Server: "b", Field: "command", Message: "duplicate key; the last value is used"},
		{Server: "a", Message: "server is defined more than once; the last definition is used"},
	}
	if !reflect.DeepEqual(cfg.Warnings, want) {
		t.Errorf("warnings = %+v", cfg.Warnings)
	}
}

func TestInterceptors(t *testing.T) {
	tests := []struct {
		value string
		want  []string
		warn  bool
	}{
		{`["a", "b"]`, []string{"a", "b"}, false},
		{`"single"`, []string{"single"}, false},
		{`[]`, []string{}, false},
		{`null`, nil, false},
		{`42`, nil, true},
		{`{"a": 1}`, nil, true},
		{`["a", 1]`, []string{"a"}, true},
	}
	for _, tt := range tests {
		cfg := mustLoad(t, `{"mcpInterceptors": `+tt.value+`}`, nil)
		if !reflect.DeepEqual(cfg.Interceptors, tt.want) || (len(cfg.Warnings) > 0) != tt.warn {
			t.Errorf("%s: interceptors %#v warnings %v", tt.value, cfg.Interceptors, cfg.Warnings)
		}
	}
}

func TestProblemFormatting(t *testing.T) {
	tests := []struct {
		p          Problem
		err, withF string
	}{
		{Problem{Server: "gh", Field: "command", Message: "m"}, "gh: command: m", "f.json:gh:command: m"},
		{Problem{Field: "guardrails.x", Message: "m"}, "guardrails.x: m", "f.json:guardrails.x: m"},
		{Problem{Server: "gh", Message: "m"}, "gh: m", "f.json:gh: m"},
		{Problem{Message: "m"}, "m", "f.json: m"},
	}
	for _, tt := range tests {
		if got := tt.p.Error(); got != tt.err {
			t.Errorf("Error() = %q, want %q", got, tt.err)
		}
		if got := tt.p.Format("f.json"); got != tt.withF {
			t.Errorf("Format() = %q, want %q", got, tt.withF)
		}
	}
	se := &SyntaxError{File: "f.json", Line: 3, Column: 7, Msg: "bad"}
	if se.Error() != "f.json:3:7: bad" {
		t.Errorf("SyntaxError = %q", se)
	}
	joined := errors.Join(Problem{Message: "a"}, fmt.Errorf("wrapped: %w", Problem{Message: "b"}))
	if ps := Problems(joined); len(ps) != 2 || ps[1].Message != "b" {
		t.Errorf("Problems = %v", ps)
	}
}

func ExampleLoad() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "extensions_config.json")
	_ = os.WriteFile(path, []byte(`{
	  "mcpServers": {
	    "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"]},
	    "search": {"type": "http", "url": "https://search.example.com/mcp", "headers": {"Authorization": "$SEARCH_TOKEN"}},
	    "broken": {"type": "http"}
	  }
	}`), 0o600)
	cfg, err := Load(path, LoadOptions{LookupEnv: func(string) (string, bool) { return "Bearer s3cret", true }})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range cfg.Servers {
		fmt.Println(s.Name, s.Type, s.Headers)
	}
	for _, bad := range cfg.Invalid {
		for _, p := range bad.Problems {
			fmt.Println(p.Error())
		}
	}
	// Output:
	// files stdio map[]
	// search http map[Authorization:[REDACTED]]
	// broken: url: http transport requires 'url' field
}
