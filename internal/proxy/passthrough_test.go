package proxy_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// exoticResult has what an SDK round trip would lose: unknown fields at
// every level, an unknown content type, an integer past 2^53 in
// structuredContent, number spellings and _meta.
const exoticResult = `{"content":[{"type":"text","text":"hi <&>","x-extra":{"deep":[1,2.50,-0]}},` +
	`{"type":"hologram","frames":3,"data":"not base64!"}],` +
	`"structuredContent":{"big":9007199254740993,"tiny":1e-7,"s":"\u00e9"},` +
	`"isError":false,"_meta":{"vendor.example/trace":{"id":"t-1"}},"unknownTop":{"a":[]}}`

type verbatim struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (v *verbatim) MarshalJSON() ([]byte, error) { return v.raw, nil }

// TestResultPassesThroughByteForByte fetches the same tools/call result over
// raw HTTP from the upstream directly and through the mux, and compares the
// result bytes.
func TestResultPassesThroughByteForByte(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "exotic"}, nil)
	srv.AddTool(&mcp.Tool{Name: "exotic", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return nil, nil })
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				return &verbatim{raw: json.RawMessage(exoticResult)}, nil
			}
			return next(ctx, method, req)
		}
	})
	up := mcptest.ServeHTTP(t, srv).URL
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"exo": {"type": "http", "url": %q}}}`, up+"/mcp"), proxy.Options{})

	direct := rawToolResult(t, up, "exotic")
	via := rawToolResult(t, m.ts.URL, "exo_exotic")
	if !bytes.Equal(direct, via) {
		t.Errorf("result changed through the mux:\ndirect %s\nvia    %s", direct, via)
	}
	for _, want := range []string{`9007199254740993`, `"hologram"`, `"unknownTop"`, `"vendor.example/trace"`, `2.50`} {
		if !bytes.Contains(via, []byte(want)) {
			t.Errorf("result through the mux lacks %s: %s", want, via)
		}
	}
}

// rawToolResult opens a raw session at base+"/mcp", calls tool and returns
// the response's result member exactly as it arrived.
func rawToolResult(t *testing.T, base, tool string) json.RawMessage {
	t.Helper()
	sid := sessionID(t, base)
	body := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"` + tool + `","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msgs [][]byte
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if d, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: ")); ok {
				msgs = append(msgs, bytes.Clone(d))
			}
		}
	} else {
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		msgs = append(msgs, b.Bytes())
	}
	for _, msg := range msgs {
		var env struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal(msg, &env) == nil && string(env.ID) == "2" && env.Result != nil {
			return env.Result
		}
	}
	t.Fatalf("no result for id 2 from %s: %q", base, msgs)
	return nil
}
