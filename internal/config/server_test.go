package config

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// problemsOf loads a single server "s" and returns its problems as
// "field: message" strings (nil when valid).
func problemsOf(t *testing.T, server string, env map[string]string) (*Server, []string, []Problem) {
	t.Helper()
	cfg := mustLoad(t, `{"inbound": {"public_url": "https://mux.example"}, "mcpServers": {"s": `+server+`}}`, env)
	var out []string
	for _, se := range cfg.Invalid {
		for _, p := range se.Problems {
			if p.Server != "s" {
				t.Errorf("problem without server name: %+v", p)
			}
			out = append(out, p.Field+": "+p.Message)
		}
	}
	return cfg.Server("s"), out, cfg.Warnings
}

func TestRequiredFields(t *testing.T) {
	tests := []struct {
		name, server string
		want         []string
	}{
		{"stdio ok", `{"command": "npx"}`, nil},
		{"stdio without command", `{"type": "stdio", "args": ["x"]}`, []string{"command: stdio transport requires 'command' field"}},
		{"stdio empty command", `{"command": ""}`, []string{"command: stdio transport requires 'command' field"}},
		{"stdio command from unset var", `{"command": "$NOPE"}`, []string{"command: stdio transport requires 'command' field; it comes from $NOPE, which is not set"}},
		{"http ok", `{"type": "http", "url": "https://h.example/mcp"}`, nil},
		{"http without url", `{"type": "http"}`, []string{"url: http transport requires 'url' field"}},
		{"sse without url", `{"type": "sse", "command": "x"}`, []string{"url: sse transport requires 'url' field"}},
		{"http url from unset var", `{"type": "http", "url": "$NOPE_URL"}`, []string{"url: http transport requires 'url' field; it comes from $NOPE_URL, which is not set"}},
		{"relative url", `{"type": "http", "url": "/mcp"}`, []string{"url: must be an absolute http or https URL"}},
		{"ws url", `{"type": "http", "url": "ws://h/mcp"}`, []string{"url: must be an absolute http or https URL"}},
		{"bad url", `{"type": "sse", "url": "http://[::1"}`, []string{"url: must be an absolute http or https URL"}},
		{"not an object", `"npx"`, []string{": must be an object, not a string"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, got, _ := problemsOf(t, tt.server, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q, want %q", got, tt.want)
			}
			if (s == nil) != (tt.want != nil) {
				t.Errorf("server valid = %v", s != nil)
			}
		})
	}
}

func TestTimeouts(t *testing.T) {
	tests := []struct {
		value   string
		want    time.Duration
		problem string
	}{
		{`absent`, DefaultSessionInitTimeout, ""},
		{`null`, 0, ""},
		{`30`, 30 * time.Second, ""},
		{`0.25`, 250 * time.Millisecond, ""},
		{`1e-12`, time.Nanosecond, ""},
		{`0`, 0, "must be greater than 0 (or null for no limit)"},
		{`-1`, 0, "must be greater than 0 (or null for no limit)"},
		{`true`, 0, "must be a number, not a boolean"},
		{`"5"`, 0, "must be a number, not a string"},
		{`1e400`, 0, "must be a finite number"},
		{`-1e400`, 0, "must be a finite number"},
		{`1e12`, 0, "is too large"},
		{`[5]`, 0, "must be a number, not a list"},
	}
	for _, key := range []string{"session_init_timeout", "tool_call_timeout"} {
		for _, tt := range tests {
			t.Run(key+"="+tt.value, func(t *testing.T) {
				server := `{"command": "x"}`
				if tt.value != "absent" {
					server = fmt.Sprintf(`{"command": "x", %q: %s}`, key, tt.value)
				}
				s, got, _ := problemsOf(t, server, nil)
				if tt.problem != "" {
					if want := []string{key + ": " + tt.problem}; !reflect.DeepEqual(got, want) {
						t.Errorf("problems = %q, want %q", got, want)
					}
					return
				}
				if s == nil {
					t.Fatalf("problems: %q", got)
				}
				d, want := s.SessionInitTimeout, tt.want
				if key == "tool_call_timeout" {
					d = s.ToolCallTimeout
					if tt.value == "absent" {
						want = 0
					}
				}
				if d != want {
					t.Errorf("%s = %v, want %v", key, d, want)
				}
			})
		}
	}
}

func TestInvalidServerSkippedWithAllProblems(t *testing.T) {
	cfg := mustLoad(t, servers(
		`"first": {"command": "a"}`,
		`"bad": {
		   "enabled": false,
		   "type": "http",
		   "args": "not-a-list",
		   "env": {"A": 1},
		   "headers": {"X-Key": "v", "x-key": "w"},
		   "routing": {"mode": "always", "prio": 1},
		   "tools": {"t": {"routing": {"priority": 1.5}}},
		   "tool_call_timeout": true,
		   "session_scope": "global",
		   "enabled": "yes"
		 }`,
		`"last": {"type": "sse", "url": "http://h/sse"}`,
	), nil)
	if got := names(cfg.Servers); !reflect.DeepEqual(got, []string{"first", "last"}) {
		t.Errorf("valid servers = %v", got)
	}
	if len(cfg.Invalid) != 1 || cfg.Invalid[0].Name != "bad" {
		t.Fatalf("invalid = %+v", cfg.Invalid)
	}
	var fields []string
	for _, p := range cfg.Invalid[0].Problems {
		fields = append(fields, p.Field)
	}
	want := []string{"enabled", "args", "env.A", "tool_call_timeout", "session_scope", "url", "headers", "routing.mode", "routing.prio", "tools.t.routing.priority"}
	if !reflect.DeepEqual(fields, want) {
		t.Errorf("problem fields = %q, want %q\n%v", fields, want, cfg.Invalid[0])
	}
}

func TestHeaders(t *testing.T) {
	const leak = "SUPER-SECRET-HEADER-VALUE-42"
	tests := []struct {
		name, server string
		want         []string
	}{
		{"ok", `{"type": "http", "url": "http://h", "headers": {"Authorization": "Bearer x", "X-Empty": ""}}`, nil},
		{"two spellings", `{"type": "http", "url": "http://h", "headers": {"Authorization": "a", "authorization": "b"}}`,
			[]string{"headers: headers maps the same HTTP header under two spellings ('Authorization' and 'authorization'); header names are case-insensitive, so keep only one"}},
		{"two spellings on stdio", `{"command": "x", "headers": {"A": "1", "a": "2"}}`,
			[]string{"headers: headers maps the same HTTP header under two spellings ('A' and 'a'); header names are case-insensitive, so keep only one"}},
		{"newline in value", `{"type": "http", "url": "http://h", "headers": {"X-Foo": "` + leak + `\n"}}`,
			[]string{"headers.X-Foo: header 'X-Foo' value contains a line break or another forbidden control character"}},
		{"value from env", `{"type": "sse", "url": "http://h", "headers": {"X-Foo": "$PADDED"}}`,
			[]string{"headers.X-Foo: header 'X-Foo' value has leading or trailing whitespace"}},
		{"non-ascii", `{"type": "http", "url": "http://h", "headers": {"X-Foo": "` + leak + `é"}}`,
			[]string{"headers.X-Foo: header 'X-Foo' value contains characters outside ASCII"}},
		{"bad name", `{"type": "http", "url": "http://h", "headers": {"X Foo": "v"}}`,
			[]string{"headers.X Foo: header name contains a character that is not allowed in an HTTP header name"}},
		{"not strings", `{"type": "http", "url": "http://h", "headers": {"X": 1}}`, []string{"headers.X: must be a string, not a number"}},
		{"bad value ignored on stdio", `{"command": "x", "headers": {"X-Foo": "a\nb"}}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, _ := problemsOf(t, tt.server, map[string]string{"PADDED": " " + leak})
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
			for _, p := range got {
				if strings.Contains(p, leak) {
					t.Errorf("problem leaks the value: %s", p)
				}
			}
		})
	}
}

func TestHeadersFromContext(t *testing.T) {
	tests := []struct {
		name, block string
		want        []string
	}{
		{"ok", `{"headers": {"X-Tenant": "tenant_token"}, "on_missing": "passthrough"}`, nil},
		{"two spellings", `{"headers": {"X-Tenant": "a", "x-tenant": "b"}}`,
			[]string{"headers_from_context.headers: headers_from_context.headers maps the same HTTP header under two spellings ('X-Tenant' and 'x-tenant'); header names are case-insensitive, so keep only one"}},
		{"blank name", `{"headers": {" ": "a"}}`, []string{"headers_from_context.headers: headers_from_context.headers must not contain a blank header name"}},
		{"blank key", `{"headers": {"X-A": " "}}`,
			[]string{"headers_from_context.headers.X-A: headers_from_context.headers['X-A'] must name a non-blank key of the request's secrets (the inbound.secrets_header object)"}},
		{"non-string key", `{"headers": {"X-A": 5}}`,
			[]string{"headers_from_context.headers.X-A: headers_from_context.headers['X-A'] must name a non-blank key of the request's secrets (the inbound.secrets_header object)"}},
		{"bad on_missing", `{"on_missing": "allow"}`, []string{"headers_from_context.on_missing: must be one of 'deny' or 'passthrough'"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, got, _ := problemsOf(t, `{"type": "http", "url": "http://h", "headers_from_context": `+tt.block+`}`, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
			if s != nil && (!s.HeadersFromContext.Enabled || s.HeadersFromContext.Ignored) {
				t.Errorf("block = %+v", s.HeadersFromContext)
			}
		})
	}
	s, _, _ := problemsOf(t, `{"type": "http", "url": "http://h", "headers_from_context": {"headers": {"A": "k"}}}`, nil)
	if h := s.HeadersFromContext; h.OnMissing != OnMissingDeny || !reflect.DeepEqual(h.Headers, map[string]string{"A": "k"}) {
		t.Errorf("defaults = %+v", h)
	}
}

func TestStdioIgnoresRequestScopedAuth(t *testing.T) {
	s, problems, warnings := problemsOf(t, `{"command": "x",
	  "user_auth": {"users": {"alice": "Bearer a"}},
	  "headers_from_context": {"headers": {"X-A": "a"}, "note": 1}}`, nil)
	if s == nil {
		t.Fatalf("problems: %q", problems)
	}
	if !s.UserAuth.Ignored || !s.HeadersFromContext.Ignored || string(s.HeadersFromContext.Extra["note"]) != "1" {
		t.Errorf("blocks = %+v %+v", s.UserAuth, s.HeadersFromContext)
	}
	if len(warnings) != 2 || warnings[0].Field != "user_auth" || warnings[1].Field != "headers_from_context" {
		t.Fatalf("warnings = %+v", warnings)
	}
	for _, w := range warnings {
		if !strings.Contains(w.Message, "ignored") || w.Server != "s" {
			t.Errorf("warning = %+v", w)
		}
	}
}

func TestUserAuth(t *testing.T) {
	s, problems, _ := problemsOf(t, `{"type": "http", "url": "http://h", "user_auth": {"users": {"alice": "$ALICE", "bob": "$UNSET"}, "extra_key": true}}`,
		map[string]string{"ALICE": "Bearer a"})
	if s == nil {
		t.Fatalf("problems: %q", problems)
	}
	u := s.UserAuth
	if !u.Enabled || u.Header != "Authorization" || u.OnMissing != OnMissingDeny || u.Ignored ||
		u.Users["alice"].Reveal() != "Bearer a" || u.Users["bob"].Reveal() != "" || string(u.Extra["extra_key"]) != "true" {
		t.Errorf("user_auth = %+v", u)
	}
	for block, want := range map[string]string{
		`{"header": " "}`:             "user_auth.header: user_auth.header must not be empty",
		`{"header": "$UNSET"}`:        "user_auth.header: user_auth.header must not be empty",
		`{"header": "Bad Header"}`:    "user_auth.header: header name contains a character that is not allowed in an HTTP header name",
		`{"on_missing": "ignore"}`:    "user_auth.on_missing: must be one of 'deny' or 'passthrough'",
		`{"users": ["alice"]}`:        "user_auth.users: must be an object of strings, not a list",
		`{"enabled": "true"}`:         "user_auth.enabled: must be a boolean, not a string",
		`"Authorization: Bearer abc"`: "user_auth: must be an object",
	} {
		_, got, _ := problemsOf(t, `{"type": "http", "url": "http://h", "user_auth": `+block+`}`, nil)
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: problems = %q, want %q", block, got, want)
		}
	}
}

func TestOAuth(t *testing.T) {
	s, problems, _ := problemsOf(t, `{"type": "http", "url": "http://h", "oauth": {
	  "token_url": "https://auth.example/token", "client_id": "id", "client_secret": "$UNSET",
	  "extra_token_params": {"resource": "r"}, "vendor_flag": {"x": 1}}}`, nil)
	if s == nil {
		t.Fatalf("problems: %q", problems)
	}
	a := s.OAuth
	want := OAuth{
		Enabled: true, TokenURL: "https://auth.example/token", GrantType: "client_credentials", ClientID: "id",
		TokenField: "access_token", TokenTypeField: "token_type", ExpiresInField: "expires_in", DefaultTokenType: "Bearer",
		RefreshSkew: 60 * time.Second, AuthStyle: "auto",
	}
	got := *a
	got.ExtraTokenParams, got.Extra = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("oauth = %+v\nwant %+v", got, want)
	}
	if a.ExtraTokenParams["resource"].Reveal() != "r" || string(a.Extra["vendor_flag"]) != `{"x":1}` {
		t.Errorf("extras = %v %v", a.ExtraTokenParams, a.Extra)
	}

	tests := []struct {
		block string
		want  []string
	}{
		{`{"client_id": "id"}`, []string{"oauth.client_secret: OAuth client_credentials requires client_id and client_secret"}},
		{`{"client_secret": null}`, []string{
			"oauth.client_id: OAuth client_credentials requires client_id and client_secret",
			"oauth.client_secret: OAuth client_credentials requires client_id and client_secret"}},
		{`{"enabled": false}`, nil},
		{`{"grant_type": "refresh_token"}`, []string{"oauth.refresh_token: OAuth refresh_token grant requires refresh_token"}},
		{`{"grant_type": "refresh_token", "refresh_token": "$RT"}`, nil},
		{`{"grant_type": "password", "enabled": false}`, []string{"oauth.grant_type: must be one of 'client_credentials', 'refresh_token' or 'authorization_code'"}},
		{`{"grant_type": "authorization_code"}`, nil},
		{`{"grant_type": "authorization_code", "client_metadata_url": "https://app.example/client.json", "authorization_url": "https://as.example/authorize"}`, nil},
		{`{"grant_type": "authorization_code", "client_metadata_url": "https://app.example/"}`, []string{"oauth.client_metadata_url: must be an https URL with a path and no fragment or credentials (it is the client_id)"}},
		{`{"grant_type": "authorization_code", "client_metadata_url": "http://app.example/c.json"}`, []string{"oauth.client_metadata_url: must be an https URL with a path and no fragment or credentials (it is the client_id)"}},
		{`{"grant_type": "authorization_code", "authorization_url": "ftp://as"}`, []string{"oauth.authorization_url: must be an absolute http or https URL"}},
		{`{"enabled": false, "auth_style": "header"}`, []string{"oauth.auth_style: must be one of 'auto', 'basic' or 'post'"}},
		{`{"enabled": false, "token_url": "not a url"}`, []string{"oauth.token_url: must be an absolute http or https URL"}},
		{`{"enabled": false, "extra_token_params": {"a": 1}}`, []string{"oauth.extra_token_params.a: must be a string, not a number"}},
		{`{"enabled": false, "refresh_skew_seconds": "60"}`, []string{"oauth.refresh_skew_seconds: must be a number, not a string"}},
	}
	for _, tt := range tests {
		_, got, _ := problemsOf(t, `{"type": "http", "url": "http://h", "oauth": `+tt.block+`}`, nil)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: problems = %q\nwant %q", tt.block, got, tt.want)
		}
	}
}

func TestRouting(t *testing.T) {
	s, problems, warnings := problemsOf(t, `{"command": "x",
	  "routing": {"mode": "prefer", "priority": 250, "keywords": ["db"]},
	  "tools": {
	    "only_kw": {"routing": {"keywords": ["orders"]}},
	    "only_prio": {"routing": {"priority": -3}},
	    "off": {"routing": {"mode": "off", "keywords": []}},
	    "no_routing": {"note": "x"}
	  }}`, nil)
	if s == nil {
		t.Fatalf("problems: %q", problems)
	}
	if want := (Routing{Mode: "prefer", Priority: 100, Keywords: []string{"db"}}); !reflect.DeepEqual(s.Routing, want) {
		t.Errorf("server routing = %+v", s.Routing)
	}
	tests := map[string]Routing{
		"only_kw":    {Mode: "prefer", Priority: 100, Keywords: []string{"orders"}},
		"only_prio":  {Mode: "prefer", Priority: 0, Keywords: []string{"db"}},
		"off":        {Mode: "off", Priority: 100, Keywords: []string{}},
		"no_routing": {Mode: "prefer", Priority: 100, Keywords: []string{"db"}},
		"unknown":    {Mode: "prefer", Priority: 100, Keywords: []string{"db"}},
	}
	for tool, want := range tests {
		if got := s.ToolRouting(tool); !reflect.DeepEqual(got, want) {
			t.Errorf("ToolRouting(%s) = %+v, want %+v", tool, got, want)
		}
	}
	if string(s.Tools["no_routing"].Extra["note"]) != `"x"` || s.Tools["no_routing"].Routing != nil {
		t.Errorf("tool override = %+v", s.Tools["no_routing"])
	}
	wantWarn := []Problem{
		{Server: "s", Field: "routing.priority", Message: "MCP routing priority 250 is above 100; clamping to 100."},
		{Server: "s", Field: "tools.only_prio.routing.priority", Message: "MCP routing priority -3 is below 0; clamping to 0."},
	}
	if !reflect.DeepEqual(warnings, wantWarn) {
		t.Errorf("warnings = %+v", warnings)
	}
	// A tool override that sets only keywords inherits mode "off" from a default server.
	s, _, _ = problemsOf(t, `{"command": "x", "tools": {"t": {"routing": {"priority": 9, "keywords": ["k"]}}}}`, nil)
	if got := s.ToolRouting("t"); got.Mode != RoutingOff || got.Priority != 9 {
		t.Errorf("ToolRouting = %+v", got)
	}
	// The caller cannot mutate the server's keywords through the result.
	s.ToolRouting("t").Keywords[0] = "mutated"
	if s.Tools["t"].Routing.Keywords[0] != "k" {
		t.Error("ToolRouting aliases the override's keywords")
	}

	for block, want := range map[string]string{
		`{"mode": "always"}`:          "routing.mode: must be one of 'off' or 'prefer'",
		`{"mode": "prefer", "x": 1}`:  "routing.x: unknown key",
		`{"priority": 5.5}`:           "routing.priority: must be a whole number",
		`{"priority": "5"}`:           "routing.priority: must be a number, not a string",
		`{"keywords": "db"}`:          "routing.keywords: must be a list of strings, not a string",
		`{"keywords": ["db", false]}`: "routing.keywords[1]: must be a string, not a boolean",
		`[]`:                          "routing: must be an object",
	} {
		_, got, _ := problemsOf(t, `{"command": "x", "routing": `+block+`}`, nil)
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: problems = %q, want %q", block, got, want)
		}
	}
}

func TestTaskToolsets(t *testing.T) {
	long := strings.Repeat("n", 129)
	tests := []struct {
		name, server string
		want         []string
	}{
		{"ok", `{"command": "x", "task_toolsets": [
			{"name": "a", "submit_tool": "s1", "status_tool": "st1", "cancel_tool": "c1"},
			{"name": "b", "submit_tool": "s2", "status_tool": "st2", "cancel_tool": "c2"}]}`, nil},
		{"reuse across groups", `{"command": "x", "task_toolsets": [
			{"name": "a", "submit_tool": "s1", "status_tool": "st1", "cancel_tool": "c1"},
			{"name": "b", "submit_tool": "s2", "status_tool": "st1", "cancel_tool": "c2"}]}`,
			[]string{"task_toolsets[1].status_tool: MCP task tool 'st1' must be unique across task_toolsets and roles; it is configured as both a.status_tool and b.status_tool"}},
		{"reuse across roles", `{"command": "x", "task_toolsets": [
			{"name": "a", "submit_tool": "t", "status_tool": "t", "cancel_tool": "c"}]}`,
			[]string{"task_toolsets[0].status_tool: MCP task tool 't' must be unique across task_toolsets and roles; it is configured as both a.submit_tool and a.status_tool"}},
		{"blank name and roles", `{"command": "x", "task_toolsets": [{"name": " ", "submit_tool": "", "status_tool": "st", "cancel_tool": "c"}]}`,
			[]string{"task_toolsets[0].name: MCP task toolset name must not be empty", "task_toolsets[0].submit_tool: must name a raw tool"}},
		{"long name", `{"command": "x", "task_toolsets": [{"name": "` + strings.Repeat("x", 256) + `", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}]}`,
			[]string{"task_toolsets[0].name: MCP task toolset name must contain at most 255 characters"}},
		{"unknown key", `{"command": "x", "task_toolsets": [{"name": "a", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c", "poll": 1}]}`,
			[]string{"task_toolsets[0].poll: unknown key"}},
		{"not a list", `{"command": "x", "task_toolsets": {}}`, []string{"task_toolsets: must be a list, not an object"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, _ := problemsOf(t, tt.server, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
		})
	}
	cfg := mustLoad(t, servers(`"`+long+`": {"command": "x", "task_toolsets": [{"name": "a", "submit_tool": "a", "status_tool": "b", "cancel_tool": "c"}]}`), nil)
	if len(cfg.Invalid) != 1 || cfg.Invalid[0].Problems[0].Message != "MCP task server name must contain 1 to 128 characters" {
		t.Errorf("long server name: %+v", cfg.Invalid)
	}
}

func TestServerDefaultsAndExtras(t *testing.T) {
	s, problems, warnings := problemsOf(t, `{"command": "x", "autoApprove": ["read"], "custom": {"a": [1, "$X"]}}`, nil)
	if s == nil {
		t.Fatalf("problems: %q", problems)
	}
	if !s.Enabled || !s.ToolNamePrefix || s.SessionScope != ScopeThread || s.SessionInitTimeout != DefaultSessionInitTimeout ||
		s.ToolCallTimeout != 0 || s.Routing.Mode != RoutingOff || s.Routing.Priority != 0 || len(warnings) != 0 {
		t.Errorf("defaults = %+v", s)
	}
	if string(s.Extra["autoApprove"]) != `["read"]` || string(s.Extra["custom"]) != `{"a":[1,"$X"]}` || len(s.Extra) != 2 {
		t.Errorf("extra = %v", s.Extra)
	}
	if string(s.Raw) != `{"command":"x","autoApprove":["read"],"custom":{"a":[1,"$X"]}}` {
		t.Errorf("raw = %s", s.Raw)
	}
	for value, want := range map[string]string{
		`"args": [1]`:                "args[0]: must be a string, not a number",
		`"env": ["A=1"]`:             "env: must be an object of strings, not a list",
		`"description": 5`:           "description: must be a string, not a number",
		`"tool_name_prefix": "no"`:   "tool_name_prefix: must be a boolean, not a string",
		`"session_scope": "process"`: "session_scope: must be one of 'thread', 'user' or 'shared'",
		`"tools": []`:                "tools: must be an object keyed by raw tool name, not a list",
		`"tools": {"t": 1}`:          "tools.t: must be an object",
	} {
		_, got, _ := problemsOf(t, `{"command": "x", `+value+`}`, nil)
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s: problems = %q, want %q", value, got, want)
		}
	}
}

func TestServerNames(t *testing.T) {
	cfg := mustLoad(t, servers(`"": {"command": "x"}`, `"has.dot": {"command": "x"}`, `"raw.ok": {"command": "x", "tool_name_prefix": false}`), nil)
	if len(cfg.Invalid) != 1 || cfg.Invalid[0].Name != "" {
		t.Errorf("invalid = %+v", cfg.Invalid)
	}
	if got := names(cfg.Servers); !reflect.DeepEqual(got, []string{"has.dot", "raw.ok"}) {
		t.Errorf("servers = %v", got)
	}
	if len(cfg.Warnings) != 1 || cfg.Warnings[0].Server != "has.dot" {
		t.Errorf("warnings = %+v", cfg.Warnings)
	}
}

// mcp-mux bounds calls on every transport (DeerFlow ignores the timeout for
// http/sse and warns); a valid timeout is never a warning.
func TestToolCallTimeoutIsNotAWarning(t *testing.T) {
	_, _, warnings := problemsOf(t, `{"type": "http", "url": "http://h", "tool_call_timeout": 5}`, nil)
	if len(warnings) != 0 {
		t.Errorf("warnings = %+v", warnings)
	}
	_, _, warnings = problemsOf(t, `{"command": "x", "tool_call_timeout": 5}`, nil)
	if len(warnings) != 0 {
		t.Errorf("stdio warnings = %+v", warnings)
	}
}

func TestDisabledServersAreValidated(t *testing.T) {
	cfg := mustLoad(t, servers(`"off": {"enabled": false, "type": "http"}`, `"on": {"enabled": false, "command": "x"}`), nil)
	if len(cfg.Invalid) != 1 || cfg.Invalid[0].Name != "off" || len(cfg.Servers) != 1 || cfg.Servers[0].Enabled {
		t.Errorf("servers %+v invalid %+v", cfg.Servers, cfg.Invalid)
	}
}

// TestSecretsNeverInMessages puts a distinctive secret everywhere a
// credential can live, makes every one of those places invalid where
// possible, and checks that no error or warning repeats it.
func TestSecretsNeverInMessages(t *testing.T) {
	const leak = "LEAKY-S3CRET-9f8e7d"
	env := map[string]string{"LEAK": leak, "LEAK_NL": leak + "\r\n", "LEAK_URL": "http://" + leak + ":" + leak + "@h:badport/x"}
	content := `{
	  "mcpServers": {
	    "a": {"type": "http", "url": "$LEAK_URL",
	          "headers": {"X-A": "$LEAK_NL", "x-a": "` + leak + `", "X-B": " ` + leak + `"},
	          "oauth": {"token_url": "$LEAK", "client_secret": "$LEAK", "refresh_token": "` + leak + `", "grant_type": "$LEAK",
	                    "extra_token_params": {"p": "$LEAK", "q": 5}, "auth_style": "` + leak + `"},
	          "user_auth": {"users": {"u": "$LEAK", "v": 1}, "on_missing": "$LEAK", "header": "$LEAK_NL"},
	          "headers_from_context": {"headers": {"X-C": "$LEAK", "x-c": "$LEAK"}, "on_missing": "` + leak + `"},
	          "routing": {"mode": "$LEAK"}, "session_scope": "$LEAK"},
	    "b": {"command": "x", "env": {"K": "$LEAK", "J": 1}, "tool_call_timeout": "$LEAK"}
	  },
	  "store": {"redis_url": "ftp://u:` + leak + `@h"},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$LEAK", "bob": ""}, "jwks_url": "$LEAK"}, "secrets_header": "$LEAK_NL"},
	  "admin": {"token": "$LEAK", "unknown": "$LEAK"}
	}`
	for _, name := range []string{"c.json", "c.yaml"} {
		cfg, err := load(t, name, content, env)
		if err == nil {
			t.Fatal("want top-level problems")
		}
		var texts []string
		texts = append(texts, err.Error())
		for _, se := range cfg.Invalid {
			texts = append(texts, se.Error())
			for _, p := range se.Problems {
				texts = append(texts, p.Error(), p.Format(name))
			}
		}
		for _, w := range cfg.Warnings {
			texts = append(texts, w.Error())
		}
		if len(cfg.Invalid) != 2 {
			t.Errorf("invalid = %+v", cfg.Invalid)
		}
		for _, s := range texts {
			if strings.Contains(s, leak) {
				t.Errorf("%s: message leaks the secret: %s", name, s)
			}
		}
		dump := fmt.Sprintf("%v %+v %#v %v", cfg.Store, cfg.Admin, cfg.Inbound.Auth.Keys, cfg.Servers)
		if strings.Contains(dump, leak) {
			t.Errorf("config dump leaks the secret: %s", dump)
		}
	}
}

func TestFingerprint(t *testing.T) {
	base := `{"type": "http", "url": "https://h/mcp", "description": "d", "headers": {"A": "$TOKEN"}, "routing": {"mode": "prefer", "keywords": ["x"]}}`
	fp := func(server string, env map[string]string) string {
		t.Helper()
		s, problems, _ := problemsOf(t, server, env)
		if s == nil {
			t.Fatalf("problems: %q", problems)
		}
		return s.Fingerprint()
	}
	env := map[string]string{"TOKEN": "one"}
	ref := fp(base, env)
	if len(ref) != 64 {
		t.Fatalf("fingerprint = %q", ref)
	}
	same := []string{
		strings.Replace(base, `"description": "d"`, `"description": "changed"`, 1),
		strings.Replace(base, `"keywords": ["x"]`, `"keywords": ["y"]`, 1),
		strings.Replace(base, `"type": "http"`, `"type": "http", "cwd": "/tmp"`, 1),
	}
	for _, s := range same {
		if got := fp(s, env); got != ref {
			t.Errorf("fingerprint changed for %s", s)
		}
	}
	different := []string{
		strings.Replace(base, "https://h/mcp", "https://h/mcp2", 1),
		strings.Replace(base, `"type": "http"`, `"type": "sse"`, 1),
		strings.Replace(base, `"A": "$TOKEN"`, `"B": "$TOKEN"`, 1),
		strings.Replace(base, `"type": "http"`, `"type": "http", "session_scope": "user"`, 1),
		strings.Replace(base, `"type": "http"`, `"type": "http", "session_init_timeout": null`, 1),
		strings.Replace(base, `"type": "http"`, `"type": "http", "oauth": {"client_id": "a", "client_secret": "b"}`, 1),
	}
	for _, s := range different {
		if got := fp(s, env); got == ref {
			t.Errorf("fingerprint unchanged for %s", s)
		}
	}
	if fp(base, map[string]string{"TOKEN": "two"}) == ref {
		t.Error("fingerprint unchanged when a header secret changed")
	}
}

func TestNumberEdgeCases(t *testing.T) {
	if _, problems, _ := problemsOf(t, `{"command": "x", "routing": {"priority": 1e300}}`, nil); problems != nil {
		t.Errorf("huge priority should clamp, got %q", problems)
	}
	s, _, _ := problemsOf(t, `{"command": "x", "routing": {"priority": 1e300}}`, nil)
	if s.Routing.Priority != 100 {
		t.Errorf("priority = %d", s.Routing.Priority)
	}
}

func TestProblemsWithErrorsAs(t *testing.T) {
	_, err := load(t, "c.json", `{"guardrails": {"nope": 1}}`, nil)
	var p Problem
	if !errors.As(err, &p) || p.Field != "guardrails.nope" {
		t.Errorf("errors.As Problem: %v", err)
	}
}

// The OpenViking case: a static header from an unset variable skips an
// enabled server with a message naming the header and the variable, and
// never blocks a disabled one (DeerFlow's example file keeps loading).
func TestHeaderFromUnsetVariableSkipsEnabledServer(t *testing.T) {
	cfg := mustLoad(t, servers(
		`"openviking": {"type": "http", "url": "http://127.0.0.1:1933/mcp", "headers": {"X-API-Key": "$OPENVIKING_API_KEY"}}`,
		`"off": {"enabled": false, "type": "http", "url": "http://127.0.0.1:1933/mcp", "headers": {"X-API-Key": "$OPENVIKING_API_KEY"}}`,
		`"set": {"type": "http", "url": "http://127.0.0.1:1933/mcp", "headers": {"X-API-Key": "$SET_KEY"}}`,
	), map[string]string{"SET_KEY": "k-123"})
	if len(cfg.Invalid) != 1 || cfg.Invalid[0].Name != "openviking" {
		t.Fatalf("invalid = %+v", cfg.Invalid)
	}
	msg := cfg.Invalid[0].Problems[0].Error()
	if !strings.Contains(msg, "X-API-Key") || !strings.Contains(msg, "$OPENVIKING_API_KEY") || !strings.Contains(msg, "not set") {
		t.Errorf("problem = %q", msg)
	}
	if got := names(cfg.Servers); !reflect.DeepEqual(got, []string{"off", "set"}) {
		t.Errorf("servers = %v", got)
	}
}

func TestServerPoolBounds(t *testing.T) {
	for _, tt := range []struct {
		server   string
		max      int
		idle     time.Duration
		problems []string
	}{
		{`{"command": "x"}`, 16, 300 * time.Second, nil},
		{`{"type": "http", "url": "http://h"}`, 256, 600 * time.Second, nil},
		{`{"type": "sse", "url": "http://h"}`, 256, 600 * time.Second, nil},
		{`{"command": "x", "max_sessions": 4, "idle_timeout_seconds": 30}`, 4, 30 * time.Second, nil},
		{`{"type": "http", "url": "http://h", "max_sessions": 1, "idle_timeout_seconds": 0.5}`, 1, 0, []string{"idle_timeout_seconds: must be between 1 and 86400 seconds"}},
		{`{"command": "x", "max_sessions": 0}`, 0, 0, []string{"max_sessions: must be between 1 and 100000"}},
		{`{"command": "x", "max_sessions": 2.5}`, 0, 0, []string{"max_sessions: must be a whole number"}},
		{`{"command": "x", "max_sessions": "8"}`, 0, 0, []string{"max_sessions: must be a number, not a string"}},
	} {
		s, problems, _ := problemsOf(t, tt.server, nil)
		if !reflect.DeepEqual(problems, tt.problems) {
			t.Errorf("%s: problems = %q, want %q", tt.server, problems, tt.problems)
			continue
		}
		if tt.problems != nil {
			continue
		}
		if s.MaxSessions != tt.max || s.IdleTimeout != tt.idle {
			t.Errorf("%s: max_sessions %d idle %s, want %d %s", tt.server, s.MaxSessions, s.IdleTimeout, tt.max, tt.idle)
		}
		if _, kept := s.Extra["max_sessions"]; kept {
			t.Errorf("%s: max_sessions kept as an unknown key", tt.server)
		}
	}
}

// protocol_version pins http and stdio servers; legacy SSE predates 2026-07-28.
func TestProtocolVersion(t *testing.T) {
	for _, tt := range []struct {
		server, want string
		problems     []string
	}{
		{`{"command": "x"}`, "auto", nil},
		{`{"command": "x", "protocol_version": "2026-07-28"}`, "2026-07-28", nil},
		{`{"command": "x", "protocol_version": "2025-11-25"}`, "2025-11-25", nil},
		{`{"type": "http", "url": "http://h", "protocol_version": "2026-07-28"}`, "2026-07-28", nil},
		{`{"type": "sse", "url": "http://h", "protocol_version": "2025-11-25"}`, "2025-11-25", nil},
		{`{"type": "sse", "url": "http://h", "protocol_version": "2026-07-28"}`, "", []string{
			"protocol_version: sse servers speak 2025-11-25 (the legacy SSE transport predates 2026-07-28); use type http for a 2026-07-28 server"}},
	} {
		s, problems, _ := problemsOf(t, tt.server, nil)
		if !reflect.DeepEqual(problems, tt.problems) {
			t.Errorf("%s: problems = %q, want %q", tt.server, problems, tt.problems)
			continue
		}
		if s != nil && s.ProtocolVersion != tt.want {
			t.Errorf("%s: protocol_version %q, want %q", tt.server, s.ProtocolVersion, tt.want)
		}
	}
}

// TestPinTools: pin_tools is off by default, one of off, warn, block,
// and a near miss of the key is named.
func TestPinTools(t *testing.T) {
	s, got, _ := problemsOf(t, `{"command": "x"}`, nil)
	if len(got) != 0 || s.PinTools != PinOff {
		t.Fatalf("default pin_tools %q (problems %q)", s.PinTools, got)
	}
	for _, mode := range []string{PinOff, PinWarn, PinBlock} {
		if s, got, _ := problemsOf(t, `{"command": "x", "pin_tools": "`+mode+`"}`, nil); len(got) != 0 || s.PinTools != mode {
			t.Errorf("pin_tools %q: read %q, problems %q", mode, s.PinTools, got)
		}
	}
	for value, want := range map[string]string{
		`"pin_tools": "strict"`: "pin_tools: must be one of 'off', 'warn' or 'block'",
		`"pin_tools": true`:     "pin_tools: must be a string, not a boolean",
	} {
		if _, got, _ := problemsOf(t, `{"command": "x", `+value+`}`, nil); len(got) != 1 || got[0] != want {
			t.Errorf("%s: problems %q, want %q", value, got, want)
		}
	}
	_, _, warnings := problemsOf(t, `{"command": "x", "pin_tool": "block"}`, nil)
	if len(warnings) != 1 || !strings.Contains(warnings[0].Message, `did you mean "pin_tools"?`) {
		t.Fatalf("a near miss of pin_tools: warnings %+v", warnings)
	}
}
