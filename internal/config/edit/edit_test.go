package edit

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// editDoc holds a secret in every place DeerFlow masks, literal or as a
// $VAR placeholder.
const editDoc = `{
  "mcpServers": {
    "gh": {
      "type": "http", "url": "https://h/mcp", "description": "GitHub",
      "headers": {"Authorization": "$GH_TOKEN", "X-Static": "lit-header-secret"},
      "oauth": {"enabled": true, "token_url": "https://h/token", "client_id": "id",
                "token_field": "access_token", "token_type_field": "token_type", "default_token_type": "Bearer",
                "client_secret": "lit-client-secret", "refresh_token": "$REFRESH",
                "extra_token_params": {"resource": "lit-extra-secret"}},
      "user_auth": {"enabled": true, "users": {"alice": "Bearer lit-alice-secret"}},
      "routing": {"mode": "prefer", "keywords": ["code"]},
      "cwd": "/srv", "apiKey": "lit-extra-apikey", "nested": {"password": "lit-nested", "list": [{"token": "lit-in-list"}]}
    },
    "fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-fs"], "env": {"FS_TOKEN": "lit-env-secret"}}
  },
  "mcpInterceptors": ["audit"],
  "skills": {"keep": true}
}`

var editSecrets = []string{"lit-header-secret", "lit-client-secret", "lit-extra-secret", "lit-alice-secret", "lit-extra-apikey", "lit-nested", "lit-in-list", "lit-env-secret", "$GH_TOKEN", "$REFRESH"}

func TestSensitiveKeyRule(t *testing.T) {
	for key, want := range map[string]bool{
		"apiKey": true, "api_key": true, "APIKey": true, "clientSecret": true, "x-auth-token": true, "password": true,
		"Authorization": true, "bearer": true, "credentials": true, "tokenizer": false, "secretary": false,
		"description": false, "tool_call_timeout": false, "keys": false, "access-key": true,
	} {
		if got := isSensitive(key); got != want {
			t.Errorf("isSensitive(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestMaskedServers(t *testing.T) {
	out, err := MaskedServers([]byte(editDoc), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range editSecrets {
		if strings.Contains(string(out), s) {
			t.Errorf("masked output contains %q:\n%s", s, out)
		}
	}
	var got struct {
		Servers map[string]map[string]any `json:"mcp_servers"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	gh := got.Servers["gh"]
	oauth := gh["oauth"].(map[string]any)
	checks := map[string]any{
		"header":        gh["headers"].(map[string]any)["Authorization"],
		"client_secret": oauth["client_secret"],
		"refresh_token": oauth["refresh_token"],
		"extra":         oauth["extra_token_params"].(map[string]any)["resource"],
		"user":          gh["user_auth"].(map[string]any)["users"].(map[string]any)["alice"],
		"apiKey":        gh["apiKey"],
		"nested":        gh["nested"].(map[string]any)["password"],
		"env":           got.Servers["fs"]["env"].(map[string]any)["FS_TOKEN"],
	}
	want := map[string]any{"header": Masked, "client_secret": nil, "refresh_token": nil, "extra": Masked, "user": Masked, "apiKey": Masked, "nested": Masked, "env": Masked}
	for k, w := range want {
		if checks[k] != w {
			t.Errorf("%s = %v, want %v", k, checks[k], w)
		}
	}
	if gh["cwd"] != "/srv" || gh["description"] != "GitHub" || oauth["client_id"] != "id" {
		t.Errorf("non-secret fields changed: %v", gh)
	}
	// The oauth fields that name token things are not secrets.
	for k, w := range map[string]string{"token_url": "https://h/token", "token_field": "access_token", "token_type_field": "token_type", "default_token_type": "Bearer"} {
		if oauth[k] != w {
			t.Errorf("oauth.%s = %v, want %q unmasked", k, oauth[k], w)
		}
	}
	if empty, _ := MaskedServers(nil, "c.json"); string(empty) != `{"mcp_servers":{}}` {
		t.Errorf("no file = %s", empty)
	}
}

// TestReplaceServersRoundTrip: PUTting back what GET returned writes the
// stored values, placeholders included.
func TestReplaceServersRoundTrip(t *testing.T) {
	masked, err := MaskedServers([]byte(editDoc), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	out, names, err := ReplaceServers([]byte(editDoc), "c.json", masked)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "gh,fs" {
		t.Errorf("names = %v", names)
	}
	for _, s := range editSecrets {
		if !strings.Contains(string(out), s) {
			t.Errorf("round trip lost %q:\n%s", s, out)
		}
	}
	if strings.Contains(string(out), Masked) {
		t.Errorf("round trip wrote a mask:\n%s", out)
	}
	if !strings.Contains(string(out), `"skills": {`) || !strings.Contains(string(out), `"mcpInterceptors": [`) {
		t.Errorf("other top-level keys lost:\n%s", out)
	}
	// The result is the same document.
	a, b := canonical(t, editDoc), canonical(t, string(out))
	if a != b {
		t.Errorf("round trip changed the document:\n%s\n%s", a, b)
	}
}

func canonical(t *testing.T, doc string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func TestReplaceServersEdits(t *testing.T) {
	tests := []struct {
		name, body string
		want       string // error text; "" = ok
		check      func(t *testing.T, out string)
	}{
		{"new env key masked", `{"mcp_servers": {"fs": {"type": "stdio", "command": "npx", "env": {"NEW": "***"}}}}`,
			"Cannot set env key 'NEW' to masked value '***'; provide a real value.", nil},
		{"new header masked", `{"mcp_servers": {"gh": {"type": "http", "url": "https://h/mcp", "headers": {"X-New": "***"}}}}`,
			"Cannot set header 'X-New' to masked value '***'; provide a real value.", nil},
		{"header case-insensitive", `{"mcp_servers": {"gh": {"type": "http", "url": "https://h/mcp", "headers": {"authorization": "***"}}}}`,
			"", func(t *testing.T, out string) {
				if !strings.Contains(out, `"authorization": "$GH_TOKEN"`) {
					t.Errorf("header not restored:\n%s", out)
				}
			}},
		{"new extra param masked", `{"mcp_servers": {"gh": {"oauth": {"token_url": "https://h/t", "extra_token_params": {"aud": "***"}}}}}`,
			"Cannot set oauth extra_token_params key 'aud' to masked value '***'; provide a real value.", nil},
		{"new user masked", `{"mcp_servers": {"gh": {"user_auth": {"users": {"bob": "***"}}}}}`,
			"Cannot set user_auth credential for 'bob' to masked value '***'; provide a real value.", nil},
		{"new sensitive extra masked", `{"mcp_servers": {"gh": {"secretKey": "***"}}}`,
			"Cannot set extra config key 'secretKey' to masked value '***'; provide a real value.", nil},
		{"edited masked array", `{"mcp_servers": {"gh": {"nested": {"password": "***", "list": [{"token": "***"}, {"token": "x"}]}}}}`,
			"Cannot edit extra config array 'list' while masked secrets remain; provide real values for every masked secret.", nil},
		{"mask in a plain field", `{"mcp_servers": {"fs": {"type": "stdio", "command": "npx", "args": ["***"]}}}`,
			"Cannot persist masked secret placeholder for mcp_servers.fs.args[0]; provide a real value.", nil},
		{"oauth secret cleared and replaced", `{"mcp_servers": {"gh": {"oauth": {"token_url": "https://h/t", "client_secret": "", "refresh_token": "new-refresh"}}}}`,
			"", func(t *testing.T, out string) {
				if !strings.Contains(out, `"client_secret": ""`) || !strings.Contains(out, `"refresh_token": "new-refresh"`) || !strings.Contains(out, "lit-extra-secret") {
					t.Errorf("oauth merge:\n%s", out)
				}
			}},
		{"omitted blocks kept, removed server gone", `{"mcp_servers": {"gh": {"type": "http", "url": "https://h/mcp"}}}`,
			"", func(t *testing.T, out string) {
				for _, want := range []string{`"routing"`, `"user_auth"`, `"cwd": "/srv"`, "lit-alice-secret"} {
					if !strings.Contains(out, want) {
						t.Errorf("lost %s:\n%s", want, out)
					}
				}
				for _, gone := range []string{`"fs"`, `"headers"`, "lit-client-secret"} {
					if strings.Contains(out, gone) {
						t.Errorf("kept %s:\n%s", gone, out)
					}
				}
			}},
		{"not an object", `{"mcp_servers": []}`, "Invalid request body: mcp_servers must be an object mapping server names to server settings", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := ReplaceServers([]byte(editDoc), "c.json", []byte(tt.body))
			var ee *EditError
			if tt.want != "" {
				if !errors.As(err, &ee) || ee.Msg != tt.want {
					t.Fatalf("err = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, string(out))
		})
	}
}

func TestSetEnabled(t *testing.T) {
	out, err := SetEnabled([]byte(editDoc), "c.json", "fs", false)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(out, config.LoadOptions{Filename: "c.json", LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if s := cfg.Server("fs"); s == nil || s.Enabled {
		t.Errorf("fs = %+v", s)
	}
	if !strings.Contains(string(out), "lit-env-secret") || !strings.Contains(string(out), "$GH_TOKEN") {
		t.Error("SetEnabled changed other values")
	}
	if _, err := SetEnabled([]byte(editDoc), "c.json", "nope", true); !errors.Is(err, ErrNoServer) {
		t.Errorf("missing server: %v", err)
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	if err := os.WriteFile(real, []byte("{}"), 0o640); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink("real.json", link); err != nil {
		t.Fatal(err)
	}
	if err := config.WriteFile(link, []byte(`{"a": 1}`)); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(real); string(got) != `{"a": 1}` {
		t.Errorf("target = %s", got)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Error("the symlink was replaced by a file")
	}
	if fi, _ := os.Stat(real); fi.Mode().Perm() != 0o640 {
		t.Errorf("mode = %v, want 0640 kept", fi.Mode().Perm())
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("temp files left behind: %v", entries)
	}

	cm := mcptest.NewConfigMap(t, "c.json", "{}")
	err := config.WriteFile(cm.Path, []byte(`{"a": 2}`))
	if !errors.Is(err, config.ErrReadOnly) || !strings.Contains(err.Error(), "ConfigMap") {
		t.Errorf("ConfigMap write: %v", err)
	}
	if got, _ := os.ReadFile(cm.Path); string(got) != "{}" {
		t.Errorf("ConfigMap file changed: %s", got)
	}
}

// FuzzReplaceServers: any PUT body either fails with an error or yields a
// JSON document that holds no mask and whose secrets stay masked on GET.
func FuzzReplaceServers(f *testing.F) {
	masked, _ := MaskedServers([]byte(editDoc), "c.json")
	f.Add(string(masked))
	f.Add(`{"mcp_servers": {"x": {"env": {"A": "***"}, "k": [1, {"token": "***"}]}}}`)
	f.Add(`{"mcp_servers": {"gh": {"oauth": {"client_secret": null}, "user_auth": {"users": {"alice": "***"}}}}}`)
	f.Fuzz(func(t *testing.T, body string) {
		out, _, err := ReplaceServers([]byte(editDoc), "c.json", []byte(body))
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON written:\n%s", out)
		}
		root, err := decodeRaw(out, "c.json")
		if err != nil {
			t.Fatal(err)
		}
		if hasMask(root) {
			t.Fatalf("a mask would be written:\n%s", out)
		}
		again, err := MaskedServers(out, "c.json")
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"lit-header-secret", "lit-client-secret", "lit-alice-secret", "lit-env-secret"} {
			if strings.Contains(string(again), s) {
				t.Fatalf("GET shows %q after PUT %s", s, body)
			}
		}
	})
}

// TestReplaceServersBindsSecrets: a stored secret, kept by "***", null or
// omission, is refused once the write changes where the server connects.
func TestReplaceServersBindsSecrets(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"url with masked header", `{"mcp_servers": {"gh": {"type": "http", "url": "https://evil/mcp", "headers": {"Authorization": "***"}}}}`,
			"MCP server 'gh' changes url while keeping the stored value of headers.Authorization"},
		{"type", `{"mcp_servers": {"gh": {"type": "sse", "url": "https://h/mcp", "headers": {"X-Static": "***"}}}}`,
			"MCP server 'gh' changes type while keeping the stored value of headers.X-Static"},
		{"omitted user_auth", `{"mcp_servers": {"gh": {"type": "http", "url": "https://evil/mcp"}}}`,
			"MCP server 'gh' changes url while keeping the stored value of user_auth.users.alice"},
		{"null oauth secret", `{"mcp_servers": {"gh": {"type": "http", "url": "https://h/mcp", "user_auth": {"users": {"alice": "x"}}, "apiKey": "x", "nested": {"password": "x", "list": [{"token": "x"}]},
		  "oauth": {"enabled": true, "token_url": "https://evil/token", "client_secret": null, "refresh_token": "r", "extra_token_params": {"resource": "x"}}}}}`,
			"MCP server 'gh' changes oauth.token_url while keeping the stored value of oauth.client_secret"},
		{"stdio args with masked env", `{"mcp_servers": {"fs": {"type": "stdio", "command": "npx", "args": ["-y", "evil-pkg"], "env": {"FS_TOKEN": "***"}}}}`,
			"MCP server 'fs' changes args while keeping the stored value of env.FS_TOKEN"},
		{"mux secret variable", `{"mcp_servers": {"x": {"type": "http", "url": "https://evil/mcp", "headers": {"K": "$ADMIN_TOKEN"}}}}`,
			"MCP server 'x' refers to environment variable 'ADMIN_TOKEN' at headers.K"},
		{"variable in args", `{"mcp_servers": {"x": {"type": "stdio", "command": "npx", "args": ["-y", "pkg", "$REDIS_PASSWORD"]}}}`,
			"MCP server 'x' refers to environment variable 'REDIS_PASSWORD' at args[2]"},
	}
	doc := strings.Replace(editDoc, `"skills"`, `"admin": {"token": "$ADMIN_TOKEN", "allowed_env": ["SHARED"]}, "skills"`, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReplaceServers([]byte(doc), "c.json", []byte(tt.body))
			var ee *EditError
			if !errors.As(err, &ee) || !strings.HasPrefix(ee.Msg, tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			for _, s := range editSecrets[:len(editSecrets)-2] {
				if strings.Contains(ee.Msg, s) {
					t.Errorf("error echoes %q", s)
				}
			}
		})
	}
	for _, ok := range []string{
		// re-entered in clear, the new url is the writer's to choose
		`{"mcp_servers": {"gh": {"type": "http", "url": "https://new/mcp", "headers": {"Authorization": "typed"}, "user_auth": {"users": {"alice": "typed"}}, "apiKey": "typed", "nested": {"password": "typed", "list": [{"token": "typed"}]}}}}`,
		// unchanged destination keeps every stored secret; DeerFlow's nulls equal absent fields
		`{"mcp_servers": {"gh": {"type": "http", "url": "https://h/mcp", "command": null, "args": [], "headers": {"Authorization": "***"}}}}`,
		// a variable the servers already use, or that admin.allowed_env lists
		`{"mcp_servers": {"x": {"type": "http", "url": "https://other/mcp", "headers": {"A": "$GH_TOKEN", "B": "$SHARED"}}}}`,
	} {
		if _, _, err := ReplaceServers([]byte(doc), "c.json", []byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// A masked value under an empty key of headers_from_context used to crash
// the merge; it is refused by the final guard like any other.
func TestReplaceServersMaskUnderEmptyKey(t *testing.T) {
	_, _, err := ReplaceServers([]byte(`{}`), "c.json", []byte(`{"mcp_servers":{"s":{"command":"x","headers_from_context":{"":{"a":"***"}}}}}`))
	var ee *EditError
	if !errors.As(err, &ee) || !strings.Contains(ee.Msg, "Cannot persist masked secret placeholder for mcp_servers.s.headers_from_context.") {
		t.Fatalf("err = %v", err)
	}
}

// An admin PUT decodes its body with the bounded decoder of config files.
func TestReplaceServersDepthBound(t *testing.T) {
	body := `{"mcp_servers": {"x": {"command": "echo", "extra": ` + strings.Repeat(`[`, 9_990) + strings.Repeat(`]`, 9_990) + `}}}`
	if _, _, err := ReplaceServers([]byte(`{"mcpServers": {}}`), "c.json", []byte(body)); err == nil || !strings.Contains(err.Error(), "deeper than 64 levels") {
		t.Errorf("ReplaceServers: %v", err)
	}
}

// exchangeDoc has a token_exchange block whose settings are not secrets
// (the block's name only looks like a secret's) beside two that are, and
// URLs carrying credentials.
const exchangeDoc = `{
  "mcpServers": {
    "tx": {
      "type": "http", "url": "https://svc-user:lit-url-password@h/mcp?api_key=lit-query-key&region=eu",
      "token_exchange": {"enabled": true, "token_url": "https://idp/token", "client_id": "mux", "client_secret": "lit-tx-secret",
        "audience": "api://svc", "scope": "read write", "auth_style": "post", "subject_header": "X-User-Token",
        "subject_token_type": "urn:ietf:params:oauth:token-type:jwt", "requested_token_type": "urn:ietf:params:oauth:token-type:access_token",
        "actor_token": "$ACTOR", "actor_token_type": "urn:ietf:params:oauth:token-type:jwt", "header": "X-Upstream", "token_prefix": "Token",
        "resource": "https://svc/", "refresh_skew_seconds": 30}
    }
  }
}`

// TestMaskedTokenExchange: GET shows where and how a token exchange happens
// and masks only its secrets and the URLs' credentials; PUTting GET's body
// back writes the stored document unchanged.
func TestMaskedTokenExchange(t *testing.T) {
	out, err := MaskedServers([]byte(exchangeDoc), "c.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"lit-tx-secret", "$ACTOR", "lit-url-password", "svc-user", "lit-query-key"} {
		if strings.Contains(string(out), s) {
			t.Errorf("masked output contains %q:\n%s", s, out)
		}
	}
	var got struct {
		Servers map[string]map[string]any `json:"mcp_servers"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	tx := got.Servers["tx"]["token_exchange"].(map[string]any)
	for k, want := range map[string]any{
		"token_url": "https://idp/token", "client_id": "mux", "audience": "api://svc", "scope": "read write", "auth_style": "post",
		"subject_header": "X-User-Token", "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
		"requested_token_type": "urn:ietf:params:oauth:token-type:access_token", "actor_token_type": "urn:ietf:params:oauth:token-type:jwt",
		"header": "X-Upstream", "token_prefix": "Token", "resource": "https://svc/", "enabled": true, "refresh_skew_seconds": 30.0,
		"client_secret": Masked, "actor_token": Masked,
	} {
		if tx[k] != want {
			t.Errorf("token_exchange.%s = %v, want %v", k, tx[k], want)
		}
	}
	if u := got.Servers["tx"]["url"]; u != "https://***@h/mcp?api_key=***&region=eu" {
		t.Errorf("url = %v, want its credentials masked", u)
	}

	back, _, err := ReplaceServers([]byte(exchangeDoc), "c.json", out)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := canonical(t, exchangeDoc), canonical(t, string(back)); a != b {
		t.Errorf("round trip changed the document:\n%s\n%s", a, b)
	}
}

// TestReplaceTokenExchange: the masked secrets of a token_exchange block and
// of URLs resolve to the stored ones only where they were stored, and stay
// bound to the token endpoint they were written for.
func TestReplaceTokenExchange(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"new token_url keeps the secret", `{"mcp_servers": {"tx": {"type": "http", "url": "https://***@h/mcp?api_key=***&region=eu",
		  "token_exchange": {"token_url": "https://evil/token", "client_id": "mux", "client_secret": "***"}}}}`,
			"MCP server 'tx' changes token_exchange.token_url while keeping the stored value of token_exchange.client_secret"},
		{"omitted secret is kept, so bound too", `{"mcp_servers": {"tx": {"type": "http", "url": "https://***@h/mcp?api_key=***&region=eu",
		  "token_exchange": {"token_url": "https://evil/token", "client_id": "mux"}}}}`,
			"MCP server 'tx' changes token_exchange.token_url while keeping the stored value of token_exchange.client_secret"},
		{"masked secret none stored", `{"mcp_servers": {"new": {"type": "http", "url": "https://n/mcp", "token_exchange": {"token_url": "https://idp/token", "client_secret": "***"}}}}`,
			"Cannot set token_exchange key 'client_secret' to masked value '***'"},
		{"masked URL credentials on another host", `{"mcp_servers": {"tx": {"type": "http", "url": "https://***@evil/mcp"}}}`,
			"Cannot set url to a URL with masked credentials '***' that is not the stored URL"},
		{"masked query key elsewhere", `{"mcp_servers": {"tx": {"type": "http", "url": "https://h/mcp?api_key=***"}}}`,
			"Cannot set url to a URL with masked credentials '***' that is not the stored URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := ReplaceServers([]byte(exchangeDoc), "c.json", []byte(tt.body))
			var ee *EditError
			if !errors.As(err, &ee) || !strings.HasPrefix(ee.Msg, tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			for _, s := range []string{"lit-tx-secret", "lit-url-password", "lit-query-key", "evil"} {
				if strings.Contains(ee.Msg, s) {
					t.Errorf("error echoes %q", s)
				}
			}
		})
	}
	// The settings that are not secrets may change while the secret is kept.
	out, _, err := ReplaceServers([]byte(exchangeDoc), "c.json", []byte(`{"mcp_servers": {"tx": {"type": "http", "url": "https://***@h/mcp?api_key=***&region=eu",
	  "token_exchange": {"token_url": "https://idp/token", "client_id": "mux2", "audience": "api://other", "client_secret": "***", "actor_token": "***"}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"client_id": "mux2"`, `"audience": "api://other"`, `"client_secret": "lit-tx-secret"`, `"actor_token": "$ACTOR"`,
		`"url": "https://svc-user:lit-url-password@h/mcp?api_key=lit-query-key&region=eu"`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("written file lacks %s:\n%s", want, out)
		}
	}
}

func TestMaskURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://h/mcp":                         "https://h/mcp",
		"$MCP_URL":                              "$MCP_URL",
		"https://tok@h/mcp":                     "https://***@h/mcp",
		"https://u:p@h:8443/a@b?token=x&q=1#f":  "https://***@h:8443/a@b?token=***&q=1#f",
		"https://h/mcp?Api-Key=x&apiKey=&plain": "https://h/mcp?Api-Key=***&apiKey=&plain",
		"http://h/p?access%5Ftoken=x":           "http://h/p?access%5Ftoken=***",
	} {
		if got := maskURL(rawdoc.Str(in)).Text; got != want {
			t.Errorf("maskURL(%q) = %q, want %q", in, got, want)
		}
	}
}
