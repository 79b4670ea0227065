package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// serverInfoOf is the name in a result's _meta serverInfo, "" without one.
func serverInfoOf(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("result %s: %v", raw, err)
	}
	var info struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(r.Meta["io.modelcontextprotocol/serverInfo"], &info)
	return info.Name
}

// A 2026-07-28 upstream names itself in every result's _meta (go-sdk does,
// per SEP-2575); through the mux (upstream.Request drops it) no result
// names the upstream, on either
// era of client, fast path or SDK path. The status names each server's
// negotiated protocol and the eras it speaks.
func TestNoUpstreamServerInfoInResults(t *testing.T) {
	modernUp := mcptest.ServeHTTPBothEras(t, mcptest.NewServer("upstream-alpha")).URL + "/mcp"
	legacyUp := mcptest.ServeHTTP(t, mcptest.NewServer("upstream-beta")).URL + "/mcp"
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {
		"alpha": {"type": "http", "url": %q, "protocol_version": "2026-07-28"},
		"beta": {"type": "http", "url": %q, "protocol_version": "2025-11-25"}}}`, modernUp, legacyUp), proxy.Options{})
	url := m.ts.URL + "/mcp"

	// The upstream does send it (else this test proves nothing).
	_, direct := modernCall(t, modernUp, nil, `{}`, "tools/call", "echo", `"name":"echo","arguments":{"text":"hi"}`)
	if direct.Error != nil {
		t.Fatalf("direct call: %+v", direct.Error)
	}
	if got := serverInfoOf(t, direct.Result); got != "upstream-alpha" {
		t.Fatalf("the upstream's own result names %q, want upstream-alpha: %s", got, direct.Result)
	}

	// 2026-07-28, the fast path (raw requests).
	_, r := modernCall(t, url, nil, `{}`, "tools/call", "alpha_echo", `"name":"alpha_echo","arguments":{"text":"hi"}`)
	if r.Error != nil || strings.Contains(string(r.Result), "upstream-alpha") || !strings.Contains(string(r.Result), `"hi"`) {
		t.Errorf("2026-07-28 fast path result: %s %+v", r.Result, r.Error)
	}
	// Both eras of go-sdk client (2026-07-28 goes by the SDK path for
	// what the fast path leaves, and its session adds mcp-mux's own).
	for _, era := range []string{"2025-11-25", ""} {
		cs := connectEra(t, url, era)
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha_echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(res)
		if name := serverInfoOf(t, raw); name != "" && name != "mcp-mux" {
			t.Errorf("era %q: the result names server %q: %s", era, name, raw)
		}
		if strings.Contains(string(raw), "upstream-alpha") {
			t.Errorf("era %q: the upstream's name reached the client: %s", era, raw)
		}
	}

	eras := map[string]string{}
	for _, s := range m.srv.Status().Servers {
		eras[s.Name] = s.Protocol + " " + strings.Join(s.Eras, ",")
		if s.Name == "alpha" && !slices.Equal(s.Eras, []string{"2026-07-28"}) {
			t.Errorf("alpha eras %v", s.Eras)
		}
	}
	if eras["alpha"] != "2026-07-28 2026-07-28" || eras["beta"] != "2025-11-25 2025-11-25" {
		t.Errorf("status protocols: %v", eras)
	}
	if !strings.Contains(m.logs.String(), `"protocol":"2026-07-28"`) {
		t.Errorf("the startup line does not name the negotiated protocol:\n%s", m.logs.String())
	}
}
