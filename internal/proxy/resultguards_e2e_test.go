package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/spill"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

const (
	guardHeaderValue = "upstream-key-7f3a9c2e51"                  // the server's static header value
	guardCarried     = "carried-secret-0d8e4b6a"                  // a secret the caller carried
	guardToken       = "ghp_0123456789abcdefghijABCDEFGHIJklmnop" // a token the mux was never told about
	guardAliceKey    = "guard-alice-key-0123456789"
	guardBobKey      = "guard-bob-key-0123456789ab"
	bigChars         = 2_000_000
)

// guardUpstream serves "leak" (a result with the server's header value,
// the caller's carried secret and a GitHub token in text and
// structuredContent) and "big" (2 MB of text in two blocks, an image and
// structuredContent); it counts nothing.
func guardUpstream(t *testing.T) string {
	s := mcp.NewServer(&mcp.Implementation{Name: "dump", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "leak"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		text := fmt.Sprintf("config: key=%s carried=%s token %s", guardHeaderValue, guardCarried, guardToken)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, map[string]any{"env": map[string]any{"KEY": guardHeaderValue, "T": guardToken}}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "big"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		half := strings.Repeat("é", bigChars/2) // two bytes a character: cuts must fall on rune boundaries
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: half}, &mcp.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
			&mcp.TextContent{Text: half}}}, map[string]any{"rows": 2}, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "mid"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("m", 30000)}}}, nil, nil
	})
	return mcptest.ServeHTTP(t, s).URL + "/mcp"
}

// guardConfig guards server "up" with block (the result_guards object),
// callers alice and bob by API key.
func guardConfig(upURL, block string) string {
	return fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q, "headers": {"X-Api-Key": %q},
		"headers_from_context": {"headers": {"X-Carried": "tok"}}}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE", "bob": "$BOB"}}},
	  "result_guards": %s}`, upURL, guardHeaderValue, block)
}

// guardClient connects to base as the caller of key, carrying a secret,
// in era pv ("": go-sdk's default, 2026-07-28).
func guardClient(t *testing.T, base, key, pv string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "guarded", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + key, "X-Mux-Secrets": `{"tok":"` + guardCarried + `"}`}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: hc}, &mcp.ClientSessionOptions{ProtocolVersion: pv})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

var guardEnv = map[string]string{"ALICE": guardAliceKey, "BOB": guardBobKey}

// eras are the protocol versions a test runs in.
var guardEras = []string{"2025-11-25", ""}

func eraName(pv string) string {
	if pv == "" {
		return "2026-07-28"
	}
	return pv
}

// TestResultGuardsRedact: a credential the mux knows (the server's
// header value, the caller's carried secret) and a GitHub token appear
// nowhere in the result the caller gets, in text or structuredContent.
func TestResultGuardsRedact(t *testing.T) {
	m, _ := startMuxEnv(t, guardConfig(guardUpstream(t), `{"redact": true}`), guardEnv, proxy.Options{})
	for _, pv := range guardEras {
		t.Run(eraName(pv), func(t *testing.T) {
			res, err := guardClient(t, m.ts.URL, guardAliceKey, pv).CallTool(context.Background(), &mcp.CallToolParams{Name: "up_leak"})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			all, _ := json.Marshal(res)
			for _, s := range []string{guardHeaderValue, guardCarried, guardToken} {
				if strings.Contains(string(all), s) {
					t.Errorf("the result still holds %q: %s", s, all)
				}
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != "config: key=[REDACTED] carried=[REDACTED] token [REDACTED]" {
				t.Errorf("text = %q", got)
			}
			if sc, _ := json.Marshal(res.StructuredContent); string(sc) != `{"env":{"KEY":"[REDACTED]","T":"[REDACTED]"}}` {
				t.Errorf("structuredContent = %s", sc)
			}
		})
	}
	if n := guardMetric(t, m, `mcp_mux_result_guard_actions_total{action="redacted",server="up"}`); n != 2 {
		t.Errorf("redacted actions counted %v, want 2", n)
	}
}

// TestResultGuardsTruncate: a 2 MB result under max_result_chars 20000
// comes back a valid result: the first 20000 characters (cut on a rune),
// the image before the cut kept, the rest and structuredContent dropped,
// and the marker. A client's hint lowers the budget; a smaller one than
// 1000 is ignored.
func TestResultGuardsTruncate(t *testing.T) {
	m, _ := startMuxEnv(t, guardConfig(guardUpstream(t), `{"max_result_chars": 20000}`), guardEnv, proxy.Options{})
	for _, pv := range guardEras {
		t.Run(eraName(pv), func(t *testing.T) {
			cs := guardClient(t, m.ts.URL, guardAliceKey, pv)
			for _, tc := range []struct {
				meta       mcp.Meta
				kept       int
				setting    string
				linkWanted bool
			}{
				{nil, 20000, "result_guards.max_result_chars", false},
				{mcp.Meta{"anthropic/maxResultSizeChars": 5000}, 5000, `_meta["anthropic/maxResultSizeChars"]`, false},
				{mcp.Meta{"anthropic/maxResultSizeChars": 999}, 20000, "result_guards.max_result_chars", false},
				{mcp.Meta{"anthropic/maxResultSizeChars": 50000}, 20000, "result_guards.max_result_chars", false},
			} {
				res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up_big", Meta: tc.meta})
				if err != nil || res.IsError {
					t.Fatalf("call: %v %+v", err, res)
				}
				if len(res.Content) != 2 || res.StructuredContent != nil {
					t.Fatalf("hint %v: %d blocks, structuredContent %v, want the head and the marker", tc.meta, len(res.Content), res.StructuredContent)
				}
				head := res.Content[0].(*mcp.TextContent).Text
				if n := utf8.RuneCountInString(head); n != tc.kept || !utf8.ValidString(head) || strings.Trim(head, "é") != "" {
					t.Errorf("hint %v: head of %d characters (valid %v), want %d", tc.meta, n, utf8.ValidString(head), tc.kept)
				}
				want := fmt.Sprintf("[mcp-mux: result truncated: %d characters, %d kept; structuredContent dropped; set by %s]", bigChars+len(`{"rows":2}`), tc.kept, tc.setting)
				if got := res.Content[1].(*mcp.TextContent).Text; got != want {
					t.Errorf("marker %q, want %q", got, want)
				}
			}
		})
	}
	if n := guardMetric(t, m, `mcp_mux_result_guard_actions_total{action="truncated",server="up"}`); n != 8 {
		t.Errorf("truncated actions counted %v, want 8", n)
	}
}

// TestResultGuardsError: on_exceed error is a tool error naming the size
// and the bound, and nothing of the result.
func TestResultGuardsError(t *testing.T) {
	m, _ := startMuxEnv(t, guardConfig(guardUpstream(t), `{"max_result_tokens": 5000, "on_exceed": "error"}`), guardEnv, proxy.Options{})
	res, err := guardClient(t, m.ts.URL, guardAliceKey, "").CallTool(context.Background(), &mcp.CallToolParams{Name: "up_big"})
	if err != nil || !res.IsError || len(res.Content) != 1 {
		t.Fatalf("call: %v %+v", err, res)
	}
	want := `mcp-mux: the result of tool "up_big" on MCP server "up" is 2000010 characters, over the bound of 20000 set by result_guards.max_result_tokens; nothing of it was returned.`
	if got := res.Content[0].(*mcp.TextContent).Text; got != want {
		t.Errorf("error %q, want %q", got, want)
	}
}

// spillMuxes runs n muxes on one Redis sharing spilled results and the
// sealing key, guarding with spill under ttl seconds.
func spillMuxes(t *testing.T, n, ttl int) []*mux {
	t.Helper()
	rs := mcptest.StartRedis(t, false)
	rc := storeclient.Wrap(redis.NewClient(&redis.Options{Addr: rs.Addr}))
	t.Cleanup(func() { _ = rc.Close() })
	cfg := guardConfig(guardUpstream(t), fmt.Sprintf(`{"redact": true, "max_result_chars": 20000, "on_exceed": "spill", "spill_ttl_seconds": %d}`, ttl))
	var out []*mux
	for range n {
		m, _ := startMuxEnv(t, cfg, guardEnv, proxy.Options{StateKey: testStateKey, SpillStore: spill.NewRedis(spill.RedisOptions{Client: rc, KeyPrefix: "guard:"})})
		out = append(out, m)
	}
	return out
}

// spilled calls up_big as cs and returns the resource_link's URI, having
// checked the head and the marker.
func spilled(t *testing.T, cs *mcp.ClientSession) string {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "up_big"})
	if err != nil || res.IsError {
		t.Fatalf("call: %v %+v", err, res)
	}
	if len(res.Content) != 3 {
		t.Fatalf("%d blocks, want the head, the marker and the link", len(res.Content))
	}
	link, ok := res.Content[2].(*mcp.ResourceLink)
	if !ok || !strings.HasPrefix(link.URI, "mux://results/") || link.MIMEType != "application/json" {
		t.Fatalf("third block %#v, want a resource_link to mux://results/", res.Content[2])
	}
	if n := utf8.RuneCountInString(res.Content[0].(*mcp.TextContent).Text); n != 20000 {
		t.Errorf("head of %d characters, want 20000", n)
	}
	want := fmt.Sprintf("[mcp-mux: result truncated: %d characters, 20000 kept; structuredContent dropped; the full result is the resource %s; set by result_guards.max_result_chars]", bigChars+len(`{"rows":2}`), link.URI)
	if got := res.Content[1].(*mcp.TextContent).Text; got != want {
		t.Errorf("marker %q, want %q", got, want)
	}
	return link.URI
}

// readSpilled reads uri as cs; the whole result, or the error.
func readSpilled(cs *mcp.ClientSession, uri string) (*mcp.CallToolResult, error) {
	rr, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, err
	}
	if len(rr.Contents) != 1 || rr.Contents[0].MIMEType != "application/json" || rr.Contents[0].URI != uri {
		return nil, fmt.Errorf("contents %+v", rr.Contents)
	}
	var full mcp.CallToolResult
	if err := json.Unmarshal([]byte(rr.Contents[0].Text), &full); err != nil {
		return nil, fmt.Errorf("the spilled result does not parse: %w", err)
	}
	return &full, nil
}

// TestResultGuardsSpill: under spill, the head and a resource_link; the
// resource is the whole result for its caller on either replica, and
// "not found" for another caller, a forged id, and after its TTL — in
// both eras.
func TestResultGuardsSpill(t *testing.T) {
	ms := spillMuxes(t, 2, 600)
	a, b := ms[0], ms[1]
	for _, pv := range guardEras {
		t.Run(eraName(pv), func(t *testing.T) {
			uri := spilled(t, guardClient(t, a.ts.URL, guardAliceKey, pv))
			for name, base := range map[string]string{"the replica that spilled": a.ts.URL, "the other replica": b.ts.URL} {
				full, err := readSpilled(guardClient(t, base, guardAliceKey, pv), uri)
				if err != nil {
					t.Fatalf("alice on %s: %v", name, err)
				}
				chars := 0
				for _, c := range full.Content {
					if tc, ok := c.(*mcp.TextContent); ok {
						chars += utf8.RuneCountInString(tc.Text)
					}
				}
				if chars != bigChars || len(full.Content) != 3 {
					t.Errorf("alice on %s reads %d characters in %d blocks, want %d in 3", name, chars, len(full.Content), bigChars)
				}
			}
			bob := guardClient(t, b.ts.URL, guardBobKey, pv)
			forged := uri[:len(uri)-4] + "AAAA"
			for name, u := range map[string]string{"bob reading alice's": uri, "a forged token": forged, "a bare id": "mux://results/" + spill.NewID()} {
				if _, err := readSpilled(bob, u); err == nil || !strings.Contains(err.Error(), "resource not found") {
					t.Errorf("%s: %v, want resource not found", name, err)
				}
			}
		})
	}
	if n := guardMetric(t, a, `mcp_mux_result_guard_actions_total{action="spilled",server="up"}`); n != 2 {
		t.Errorf("spilled actions on the first replica counted %v, want 2", n)
	}
}

// TestResultGuardsSpillExpires: a spilled result is gone after its TTL
// (a 30000-character result, read back at once, then past 3 s).
func TestResultGuardsSpillExpires(t *testing.T) {
	m := spillMuxes(t, 1, 3)[0]
	alice := guardClient(t, m.ts.URL, guardAliceKey, "")
	res, err := alice.CallTool(context.Background(), &mcp.CallToolParams{Name: "up_mid"})
	if err != nil || len(res.Content) != 3 {
		t.Fatalf("call: %v %+v", err, res)
	}
	uri := res.Content[2].(*mcp.ResourceLink).URI
	if full, err := readSpilled(alice, uri); err != nil || len(full.Content) != 1 {
		t.Fatalf("before its TTL: %v", err)
	}
	time.Sleep(4 * time.Second) // past the 3 s TTL: a state, not a duration, is asserted
	if _, err := readSpilled(alice, uri); err == nil || !strings.Contains(err.Error(), "resource not found") {
		t.Errorf("after its TTL: %v, want resource not found", err)
	}
}

// guardMetric is the value of series on m's /metrics (-1: absent).
func guardMetric(t *testing.T, m *mux, series string) float64 {
	t.Helper()
	resp, err := testHTTP.Get(m.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return metricValue(string(body), series)
}
