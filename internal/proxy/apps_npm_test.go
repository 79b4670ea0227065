package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/nodeclients"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// TestAppsNPMServer: two real MCP Apps servers built on npm's
// @modelcontextprotocol/ext-apps (registerAppTool, registerAppResource;
// testdata/appsnpm), both with show_dashboard → ui://dashboard, over
// stdio: the links are per server, each UI reads as its own server's
// HTML, and an app's raw-name call with its origin reaches its server.
func TestAppsNPMServer(t *testing.T) {
	dir, err := nodeclients.InstallFS("appsnpm", os.DirFS("testdata/appsnpm"))
	if err != nil {
		t.Fatalf("install: %v", err)
	}
	node, script := nodeclients.Node(t), filepath.Join(dir, "app-server.mjs")
	server := func(name string) string {
		args, _ := json.Marshal([]string{script, name})
		return fmt.Sprintf(`%q: {"type": "stdio", "command": %q, "args": %s}`, name, node, args)
	}
	m := startMux(t, `{"mcpServers": {`+server("alpha")+`, `+server("beta")+`}}`, proxy.Options{})
	ctx := context.Background()
	for _, version := range []string{"2025-11-25", ""} {
		cs := connectApp(t, m, "", version)
		if version == "" {
			version = "2026-07-28"
		}
		want := "map[alpha_show_dashboard:ui://alpha/dashboard ui://alpha/dashboard beta_show_dashboard:ui://beta/dashboard ui://beta/dashboard]"
		if got := uiLinks(t, cs); fmt.Sprint(got) != want {
			t.Errorf("%s: links %v, want %s", version, got, want)
		}
		for _, name := range []string{"alpha", "beta"} {
			uri, text, err := readText(ctx, cs, "ui://"+name+"/dashboard")
			if err != nil || text != "<html>"+name+"</html>" || uri != "ui://"+name+"/dashboard" {
				t.Errorf("%s: read %s's UI: %q %q %v", version, name, uri, text, err)
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "show_dashboard", Arguments: map[string]any{}, Meta: mcp.Meta{"mux/uiResource": "ui://" + name + "/dashboard"}})
			if err != nil || len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != name+" dashboard" {
				t.Errorf("%s: %s's app calls show_dashboard: %v %+v", version, name, err, res)
			}
		}
		if _, _, err := call(ctx, cs, "show_dashboard", nil); err == nil || !strings.Contains(err.Error(), "alpha_show_dashboard, beta_show_dashboard") {
			t.Errorf("%s: show_dashboard with no origin: %v", version, err)
		}
	}
}
