package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// Issue 32, attack 10: fixed arguments against an upstream that decodes
// its arguments with Go's encoding/json, which matches member names
// case-insensitively (Unicode simple folding: 'ſ' is 's', the Kelvin
// sign 'K' is 'k') and lets the last of two matching members win.

// goDecodingUpstream serves, in both eras, a "grant" tool whose handler
// decodes its arguments into a Go struct with encoding/json and answers
// with what it decoded, as "scope=… key=… q=…".
func goDecodingUpstream(t *testing.T) string {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "iam", Version: "test"}, nil)
	s.AddTool(&mcp.Tool{Name: "grant", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
		"q": map[string]any{"type": "string"}, "scope": map[string]any{"type": "string"}, "key": map[string]any{"type": "string"}}}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Q     string `json:"q"`
				Scope string `json:"scope"`
				Key   string `json:"key"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("scope=%s key=%s q=%s", in.Scope, in.Key, in.Q)}}}, nil
		})
	return mcptest.ServeHTTPBothEras(t, s).URL + "/mcp"
}

// fixedArgsMux is a mux in front of goDecodingUpstream with grant's scope
// fixed to "read" and key to "k1"; disableModernFast sends every
// 2026-07-28 request through the SDK.
func fixedArgsMux(t *testing.T, disableModernFast bool) *mux {
	t.Helper()
	cfg := fmt.Sprintf(`{"mcpServers": {"iam": {"type": "http", "url": %q, "tools": {"grant": {"fixed_arguments": {"scope": "read", "key": "k1"}}}}}}`,
		goDecodingUpstream(t))
	return startMux(t, cfg, proxy.Options{DisableModernFastPath: disableModernFast})
}

// fixedArgsAttacks are arguments (as sent, in this member order) that try
// to set scope or key past the fixed values.
var fixedArgsAttacks = []string{
	`{"q":"x","scope":"admin"}`,
	`{"q":"x","ſcope":"admin"}`,       // U+017F LATIN SMALL LETTER LONG S, sorted after "scope"
	`{"q":"x","\u017fcope":"admin"}`,  // the same, escaped
	`{"q":"x","SCOPE":"admin"}`,       // ASCII case
	`{"q":"x","ſCOPE":"admin"}`,       // both
	`{"q":"x","\u212aey":"evil"}`,     // U+212A KELVIN SIGN for "key"
	`{"q":"x","\u212aEY":"evil"}`,     // the same, upper case
	`{"ſcope":"admin","q":"x"}`,       // before the other members
	`{"q":"x","sc_ope":"admin"}`,      // what a case-insensitive encoding/json/v2 field also matches
	`{"q":"x","S-C-O-P-E":"admin"}`,   // the same, with dashes
	`{"q":"x","ſcope":{"a":"admin"}}`, // not even a string
}

// fixedArgsPath sends one tools/call of grant with raw arguments and
// returns its JSON-RPC reply; each is one way a call reaches CallTool.
type fixedArgsPath struct {
	name string
	call func(t *testing.T, args string) rpcReply
}

// fixedArgsPaths are the 2025-11-25 fast path, the SDK path (a 2024-11-05
// session, which the fast path leaves to the SDK) and the 2026-07-28 fast
// and SDK paths.
func fixedArgsPaths(t *testing.T) []fixedArgsPath {
	legacy := fixedArgsMux(t, false)
	modernSDK := fixedArgsMux(t, true)
	session := func(version string) func(t *testing.T, args string) rpcReply {
		sid := rawSession(t, legacy.ts.URL, version)
		return func(t *testing.T, args string) rpcReply {
			resp, err := rawPost(context.Background(), legacy.ts.URL, sid, version,
				`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"iam_grant","arguments":`+args+`}}`)
			if err != nil {
				t.Fatal(err)
			}
			rs := readReplies(t, resp)
			if len(rs) != 1 {
				t.Fatalf("%d replies", len(rs))
			}
			b, _ := json.Marshal(rs[0])
			var r rpcReply
			_ = json.Unmarshal(b, &r)
			return r
		}
	}
	modern := func(m *mux) func(t *testing.T, args string) rpcReply {
		return func(t *testing.T, args string) rpcReply {
			_, _, body := postModern(t, m.ts.URL+"/mcp", modernHeaders("tools/call", "iam_grant"), modernCallBody("{}", "iam_grant", args))
			return reply(t, body)
		}
	}
	return []fixedArgsPath{
		{"2025-11-25 fast path", session("2025-11-25")},
		{"2025-11-25 SDK path", session("2024-11-05")},
		{"2026-07-28 fast path", modern(legacy)},
		{"2026-07-28 SDK path", modern(modernSDK)},
	}
}

// upstreamSaw is the text of a call's result: what the upstream decoded.
func upstreamSaw(t *testing.T, r rpcReply) string {
	t.Helper()
	if r.Error != nil {
		t.Fatalf("call: JSON-RPC error %d %s", r.Error.Code, r.Error.Message)
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(r.Result, &res); err != nil || len(res.Content) != 1 {
		t.Fatalf("call result %s: %v", r.Result, err)
	}
	if res.IsError {
		t.Fatalf("tool error: %s", r.Result)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// TestFixedArgumentsCaseFolding: whatever member the caller sends that a
// Go upstream's encoding/json would take for a fixed argument (its name
// under Unicode case folding, before or after the real one), the upstream
// decodes the fixed value, on every path of both eras.
func TestFixedArgumentsCaseFolding(t *testing.T) {
	for _, p := range fixedArgsPaths(t) {
		t.Run(p.name, func(t *testing.T) {
			if got := upstreamSaw(t, p.call(t, `{"q":"x"}`)); got != "scope=read key=k1 q=x" {
				t.Fatalf("a plain call: the upstream saw %q", got)
			}
			for _, args := range fixedArgsAttacks {
				if got := upstreamSaw(t, p.call(t, args)); got != "scope=read key=k1 q=x" {
					t.Errorf("arguments %s: the upstream saw %q, want scope=read key=k1 q=x", args, got)
				}
			}
		})
	}
}

// TestArgumentsDuplicateKeysRefused: arguments that repeat a member name
// (at any depth, however it is escaped) are refused with -32602 naming
// the member, bounded in length, and never reach the upstream; on every
// path of both eras.
func TestArgumentsDuplicateKeysRefused(t *testing.T) {
	long := strings.Repeat("k", 64<<10)
	cases := []struct{ args, named string }{
		{`{"q":"x","q":"y"}`, `"q"`},
		{`{"q":"x","scope":"read","scope":"admin"}`, `"scope"`},
		{`{"q":"x","\u0071":"y"}`, `"q"`},
		{`{"q":"x","nested":{"a":1,"b":[{"c":1,"c":2}]}}`, `"c"`},
		{`{"q":"x","` + long + `":1,"` + long + `":2}`, `"kkkk`},
	}
	for _, p := range fixedArgsPaths(t) {
		t.Run(p.name, func(t *testing.T) {
			for _, c := range cases {
				r := p.call(t, c.args)
				if r.Error == nil {
					t.Errorf("arguments %.80s: no error; result %s", c.args, r.Result)
					continue
				}
				if r.Error.Code != -32602 || !strings.Contains(r.Error.Message, "repeat") || !strings.Contains(r.Error.Message, c.named) {
					t.Errorf("arguments %.80s: error %d %q, want -32602 naming %s", c.args, r.Error.Code, r.Error.Message, c.named)
				}
				if len(r.Error.Message) > 512 {
					t.Errorf("arguments %.80s: the error is %d bytes long", c.args, len(r.Error.Message))
				}
			}
			// Distinct names that only fold alike are not duplicates.
			if got := upstreamSaw(t, p.call(t, `{"q":"x","Q":"y"}`)); !strings.HasPrefix(got, "scope=read key=k1") {
				t.Errorf("the upstream saw %q", got)
			}
		})
	}
}
