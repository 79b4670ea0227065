package proxy_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// A subscriptions/listen with taskIds, which mcp-mux serves itself, is
// refused exactly as the SDK refuses the same listen without taskIds when
// its headers or protocol version are wrong.
func TestTaskListenHeaderParity(t *testing.T) {
	m := startMux(t, `{"mcpServers": {}}`, proxy.Options{})
	url := m.ts.URL + "/mcp"
	body := func(version, notifications string) string {
		return `{"jsonrpc":"2.0","id":"l1","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"` + version + `",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":` + tasksCaps + `},` +
			`"notifications":` + notifications + `}}`
	}
	for _, c := range []struct {
		name    string
		hdr     map[string]string
		version string
	}{
		{"unsupported version", map[string]string{"Mcp-Protocol-Version": "2099-01-01", "Mcp-Method": "subscriptions/listen"}, "2099-01-01"},
		{"no event stream accepted", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen", "Accept": "application/json"}, "2026-07-28"},
		{"not JSON", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen", "Content-Type": "text/plain"}, "2026-07-28"},
		{"version mismatch", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}, "2025-11-25"},
		{"method mismatch", map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"}, "2026-07-28"},
	} {
		sdkStatus, sdkBody := firstBytes(t, url, c.hdr, body(c.version, `{"toolsListChanged":true}`))
		status, got := firstBytes(t, url, c.hdr, body(c.version, `{"taskIds":["mcp-task-00000000000000000000000000000000"],"toolsListChanged":true}`))
		if sdkStatus == http.StatusOK && strings.Contains(sdkBody, "acknowledged") {
			t.Fatalf("%s: the SDK served the listen: %s", c.name, sdkBody)
		}
		if status != sdkStatus || strings.Contains(got, "acknowledged") {
			t.Errorf("%s: with taskIds HTTP %d %s; the SDK answers HTTP %d %s", c.name, status, got, sdkStatus, sdkBody)
		}
	}
}

// firstBytes posts body and returns the status and what the response
// carried in its first chunk (a listen stream stays open).
func firstBytes(t *testing.T, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := testHTTP.Do(mcpRequest(t, ctx, http.MethodPost, url, hdr, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b := make([]byte, 4096)
	n, _ := io.ReadAtLeast(resp.Body, b, 1)
	return resp.StatusCode, string(b[:n])
}
