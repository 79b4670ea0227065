package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// A value the caller carried in X-Mux-Secrets is a credential: where it
// shows in the arguments of a server that opted in to recording them, the
// span's gen_ai.tool.call.arguments and the audit record show [REDACTED]
// instead (docs/observability.md, what is recorded of a call). The value sits under a member
// name nothing else redacts, so only the carried secret's scrubbing can
// hide it.
func TestCarriedSecretScrubbedFromArguments(t *testing.T) {
	r := otlptest.Start(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	const carried = "carried-in-args-5e19c0"
	cfg := fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q, "telemetry": {"arguments": true},
		"headers_from_context": {"headers": {"X-Carried": "tok"}}}}}`, up.URL+"/mcp")
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a, err := audit.New(audit.Options{Enabled: true, Output: path, Detail: audit.DetailFull})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, cfg, proxy.Options{Audit: a, Telemetry: telemetry.Options{Enabled: true, Endpoint: r.Endpoint(),
		Env: func(string) (string, bool) { return "", false }}})
	caller, meta := callerTrace(t, r)
	c := mcp.NewClient(&mcp.Implementation{Name: "carried", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"X-Mux-Secrets": `{"tok":"` + carried + `"}`}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: m.ts.URL + "/mcp", HTTPClient: hc},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	mm := mcp.Meta{}
	for k, v := range meta {
		mm[k] = v
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_echo", Arguments: map[string]any{"text": "pasted " + carried}, Meta: mm})
	if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.Content[0]), carried) {
		t.Fatalf("the call did not reach the upstream with its argument (so the test proves nothing): %v %+v", err, res)
	}
	caller.End()
	traceID := caller.SpanContext().TraceID().String()
	spans := r.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool {
		return count(otlptest.InTrace(all, traceID), "SERVER", "mcp-mux", "") == 1
	})
	span := namedSpan(t, otlptest.InTrace(spans, traceID), "SERVER", "mcp-mux", "tools/call web_echo")
	if args, _ := span.Attrs["gen_ai.tool.call.arguments"].(string); !sameJSON([]byte(args), `{"text":"pasted [REDACTED]"}`) {
		t.Errorf("span arguments = %q, want the carried value redacted", args)
	}
	recs, raw := auditRecords(t, a, path)
	if len(recs) != 1 || !sameJSON(recs[0].Arguments, `{"text":"pasted [REDACTED]"}`) {
		t.Errorf("audit record arguments = %s, want the carried value redacted", raw)
	}
	if dump := otlptest.Dump(spans) + raw; strings.Contains(dump, carried) {
		t.Errorf("the carried secret reached a span or a record:\n%s", grepLines(dump, carried))
	}
}
