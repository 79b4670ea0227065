package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// An upstream URL's credentials (a token in its query, a user name) never
// reach a caller's tool error or the log when the server stops answering.
func TestUpstreamURLNotInErrors(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	url := strings.Replace(web.URL, "http://", "http://tok-user:tok-pass@", 1) + "/mcp?token=qs-secret-value"
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, url), proxy.Options{})
	sid := rawSession(t, m.ts.URL, "2025-11-25")
	call := `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"hi"}}}`
	resp, err := rawPost(context.Background(), m.ts.URL, sid, "2025-11-25", call)
	if err != nil {
		t.Fatal(err)
	}
	if rs := readReplies(t, resp); len(rs) != 1 || !strings.Contains(string(rs[0].Result), "hi") {
		t.Fatalf("first call: %+v", rs)
	}
	web.CloseClientConnections()
	web.Close()
	resp, err = rawPost(context.Background(), m.ts.URL, sid, "2025-11-25", call)
	if err != nil {
		t.Fatal(err)
	}
	rs := readReplies(t, resp)
	if resp.StatusCode != http.StatusOK || len(rs) != 1 || !strings.Contains(string(rs[0].Result), `"isError":true`) {
		t.Fatalf("call to a stopped server: HTTP %d %+v", resp.StatusCode, rs)
	}
	for what, text := range map[string]string{"tool error": string(rs[0].Result), "log": m.logs.String()} {
		for _, secret := range []string{"qs-secret-value", "tok-pass", "tok-user"} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s carries %q: %s", what, secret, text)
			}
		}
	}
}
