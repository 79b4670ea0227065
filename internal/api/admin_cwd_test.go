package api

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminLaunchPolicyCwd: a working directory decides which local
// programs and settings a launcher loads, so an API write may not add or
// change a stdio server's cwd; one the file already runs with passes, and
// one that is no directory is a validation error naming the server and
// the field (issue 39).
func TestAdminLaunchPolicyCwd(t *testing.T) {
	dir := t.TempDir()
	work, other := filepath.Join(dir, "work"), filepath.Join(dir, "other")
	for _, d := range []string{work, other} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	doc := strings.Replace(adminDoc, `"args": ["-y", "@modelcontextprotocol/server-filesystem"],`,
		`"args": ["-y", "@modelcontextprotocol/server-filesystem"], "cwd": "work",`, 1)
	f := startAdmin(t, filepath.Join(dir, "c.json"), doc)
	code, got := f.do("GET", "/api/mcp/config", adminToken, "")
	if code != http.StatusOK || !strings.Contains(got, `"cwd":"work"`) {
		t.Fatalf("GET: %d %s", code, got)
	}
	if code, body := f.do("PUT", "/api/mcp/config", adminToken, got); code != http.StatusOK {
		t.Fatalf("PUT of GET's output (fs keeps its cwd): %d %s", code, body)
	}
	var cur struct {
		Servers map[string]map[string]any `json:"mcp_servers"`
	}
	if err := json.Unmarshal([]byte(got), &cur); err != nil {
		t.Fatal(err)
	}
	with := func(name string, set map[string]any) string {
		servers := map[string]any{}
		for n, s := range cur.Servers {
			servers[n] = s
		}
		s := map[string]any{"type": "stdio", "command": "npx", "args": []string{"-y", "pkg"}}
		for k, v := range cur.Servers[name] {
			s[k] = v
		}
		for k, v := range set {
			s[k] = v
		}
		servers[name] = s
		b, _ := json.Marshal(map[string]any{"mcp_servers": servers})
		return string(b)
	}
	refused := "sets a working directory (cwd), which decides what local programs and settings its launcher loads; set it in the config file instead."
	for _, tc := range []struct{ name, body, want string }{
		{"added with a cwd", with("added", map[string]any{"cwd": other}), "MCP server 'added' " + refused},
		{"cwd changed", with("fs", map[string]any{"cwd": "other"}), "MCP server 'fs' " + refused},
		{"cwd missing", with("added", map[string]any{"cwd": "missing"}), `Invalid MCP configuration: added: cwd: "` + filepath.Join(dir, "missing") + `" does not exist`},
		{"cwd a file", with("added", map[string]any{"cwd": "c.json"}), `Invalid MCP configuration: added: cwd: "` + filepath.Join(dir, "c.json") + `" is not a directory`},
	} {
		code, body := f.do("PUT", "/api/mcp/config", adminToken, tc.body)
		if code != http.StatusBadRequest || !strings.HasPrefix(detail(t, body), tc.want) {
			t.Errorf("%s: %d %s, want 400 %q", tc.name, code, body, tc.want)
		}
	}
	if f.reloads != 1 {
		t.Errorf("reloads = %d, want only the unchanged PUT's", f.reloads)
	}
}
