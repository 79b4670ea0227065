package proxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// initialize posts an initialize request with the given extra headers and
// returns the HTTP status.
func initialize(t *testing.T, url string, h map[string]string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, url+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range h {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestHostAndOriginChecks(t *testing.T) {
	web := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	servers := fmt.Sprintf(`"mcpServers": {"web": {"type": "http", "url": %q}}`, web.URL+"/mcp")

	// Default: a loopback listener accepts only loopback Host names (DNS rebinding).
	m := startMux(t, "{"+servers+"}", proxy.Options{})
	for host, want := range map[string]int{"": 200, "localhost": 200, "evil.example": 403, "evil.example:80": 403} {
		h := map[string]string{}
		if host != "" {
			h["Host"] = host
		}
		if got := initialize(t, m.ts.URL, h); got != want {
			t.Errorf("Host %q: %d, want %d", host, got, want)
		}
	}
	// A cross-site browser request is refused unless its origin is trusted.
	cross := map[string]string{"Origin": "https://app.example", "Sec-Fetch-Site": "cross-site"}
	if got := initialize(t, m.ts.URL, cross); got != 403 {
		t.Errorf("cross-origin request: %d, want 403", got)
	}

	// allowed_hosts and allowed_origins.
	m = startMux(t, `{`+servers+`, "inbound": {"allowed_hosts": ["mux.internal"], "allowed_origins": ["https://app.example"]}}`, proxy.Options{})
	if got := initialize(t, m.ts.URL, map[string]string{"Host": "mux.internal:8931"}); got != 200 {
		t.Errorf("allowed host: %d", got)
	}
	if got := initialize(t, m.ts.URL, nil); got != 403 {
		t.Errorf("host outside allowed_hosts: %d, want 403", got)
	}
	cross["Host"] = "mux.internal"
	if got := initialize(t, m.ts.URL, cross); got != 200 {
		t.Errorf("trusted origin: %d, want 200", got)
	}
}
