package mcptest_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
)

func TestMain(m *testing.M) {
	mcptest.MaybeServeStdio()
	code := m.Run()
	if code == 0 {
		if err := mcptest.LeakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const wait = 10 * time.Second

// eras are the protocol versions a client asks for: a 2025-11-25 session,
// and 2026-07-28 requests each carrying the io.modelcontextprotocol/ _meta keys.
var eras = []string{"2025-11-25", "2026-07-28"}

// parent is a caller's span: the remote parent a request's _meta names.
type parent struct{ traceID, spanID string }

func newParent() parent {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return parent{hex.EncodeToString(b[:16]), hex.EncodeToString(b[16:])}
}

func (p parent) traceparent() string { return "00-" + p.traceID + "-" + p.spanID + "-01" }

// headerClient is an HTTP client whose requests carry header.
func headerClient(header http.Header) *http.Client {
	return &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		for k, v := range header {
			r.Header[k] = v
		}
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// connect returns a client session with a traced server named name
// exporting to r, over transport ("http" or "stdio") in era; over HTTP,
// every request carries header.
func connect(t *testing.T, r *otlptest.Receiver, transport, name, era string, header http.Header) *mcp.ClientSession {
	t.Helper()
	var tr mcp.Transport
	switch transport {
	case "http":
		ts := mcptest.ServeHTTPBothEras(t, mcptest.TracedServer(t, r.Endpoint(), name))
		tr = &mcp.StreamableClientTransport{Endpoint: ts.URL + "/mcp", HTTPClient: headerClient(header), DisableStandaloneSSE: true}
	case "stdio":
		command, args, env := mcptest.StdioServer(name, mcptest.StdioOptions{TraceEndpoint: r.Endpoint()})
		cmd := exec.Command(command, args...)
		// A -race child otherwise sleeps 1s in its exit handler.
		cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		tr = &mcp.CommandTransport{Command: cmd}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "caller", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: era})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != era {
		t.Fatalf("negotiated %s, want %s", got, era)
	}
	return cs
}

// call calls tool with meta in its _meta.
func call(t *testing.T, cs *mcp.ClientSession, tool string, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "hi"}, Meta: meta})
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

// childOf waits for the SERVER span named name whose parent is p and
// returns it.
func childOf(t *testing.T, r *otlptest.Receiver, p parent, name string) otlptest.Span {
	t.Helper()
	var found otlptest.Span
	r.WaitSpans(t, wait, func(spans []otlptest.Span) bool {
		for _, s := range otlptest.InTrace(spans, p.traceID) {
			if s.ParentSpanID == p.spanID && s.Kind == "SERVER" && s.Name == name {
				found = s
				return true
			}
		}
		return false
	})
	return found
}

// checkAttrs fails t for each attribute of want the span lacks or has
// another value of (nil: that it has).
func checkAttrs(t *testing.T, s otlptest.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attrs[k]; ok != (v != nil) || got != v {
			t.Errorf("%s = %v (present %v), want %v; span %s", k, got, ok, v, s)
		}
	}
}

// TestTracedServer calls a traced server over HTTP and stdio, in both
// eras, with a trace context in the call's _meta: the server's span for the
// call is a child of the caller's span, named and attributed after the MCP
// semantic conventions, with the caller's trace state and baggage.
func TestTracedServer(t *testing.T) {
	r := otlptest.Start(t)
	for _, transport := range []string{"http", "stdio"} {
		for _, era := range eras {
			t.Run(transport+"/"+era, func(t *testing.T) {
				name := "traced-" + transport
				cs := connect(t, r, transport, name, era, nil)
				p := newParent()
				res := call(t, cs, "echo", mcp.Meta{"traceparent": p.traceparent(), "tracestate": "caller=1", "baggage": "user=alice"})
				if res.IsError {
					t.Fatalf("echo: %+v", res)
				}
				s := childOf(t, r, p, "tools/call echo")
				netTransport := map[string]string{"http": "tcp", "stdio": "pipe"}[transport]
				checkAttrs(t, s, map[string]any{
					"mcp.method.name":             "tools/call",
					"gen_ai.tool.name":            "echo",
					"gen_ai.operation.name":       "execute_tool",
					"mcp.protocol.version":        era,
					"network.transport":           netTransport,
					mcptest.AttrMetaTraceparent:   p.traceparent(),
					mcptest.AttrBaggage:           "user=alice",
					mcptest.AttrHeaderTraceparent: nil,
				})
				if s.Name != "tools/call echo" || s.Service() != name || s.TraceState != "caller=1" || s.Status.Code != "UNSET" || len(s.Links) != 0 {
					t.Errorf("span %s (trace state %q, links %v)", s, s.TraceState, s.Links)
				}
				if transport == "http" && era == "2025-11-25" && s.Attrs["mcp.session.id"] == nil {
					t.Errorf("no mcp.session.id: %s", s)
				}
			})
		}
	}
}

// TestTracedServerHeaders: over HTTP, without a trace context in _meta the
// server continues the HTTP headers' one; with both, _meta's is the parent
// and the headers' is linked.
func TestTracedServerHeaders(t *testing.T) {
	r := otlptest.Start(t)
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			h := newParent()
			cs := connect(t, r, "http", "traced-http", era, http.Header{"Traceparent": {h.traceparent()}, "Baggage": {"via=header"}})

			call(t, cs, "echo", nil)
			s := childOf(t, r, h, "tools/call echo")
			checkAttrs(t, s, map[string]any{"gen_ai.tool.name": "echo", mcptest.AttrHeaderTraceparent: h.traceparent(), mcptest.AttrBaggage: "via=header"})
			if _, ok := s.Attrs[mcptest.AttrMetaTraceparent]; ok || len(s.Links) != 0 {
				t.Errorf("span %s", s)
			}

			m := newParent()
			call(t, cs, "echo", mcp.Meta{"traceparent": m.traceparent()})
			s = childOf(t, r, m, "tools/call echo")
			if len(s.Links) != 1 || s.Links[0].TraceID != h.traceID || s.Links[0].SpanID != h.spanID {
				t.Errorf("links = %+v, want the headers' context %+v", s.Links, h)
			}
			checkAttrs(t, s, map[string]any{mcptest.AttrMetaTraceparent: m.traceparent(), mcptest.AttrHeaderTraceparent: h.traceparent()})
		})
	}
}

// TestTracedServerErrors: a tool error result and a JSON-RPC error are
// ERROR spans with error.type.
func TestTracedServerErrors(t *testing.T) {
	r := otlptest.Start(t)
	cs := connect(t, r, "stdio", "traced-stdio", "2026-07-28", nil)

	p := newParent()
	if res := call(t, cs, "fail", mcp.Meta{"traceparent": p.traceparent()}); !res.IsError {
		t.Fatalf("fail: %+v", res)
	}
	s := childOf(t, r, p, "tools/call fail")
	checkAttrs(t, s, map[string]any{"error.type": "tool_error"})
	if s.Status.Code != "ERROR" {
		t.Errorf("status %+v", s.Status)
	}

	p = newParent()
	_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "no-such-tool", Meta: mcp.Meta{"traceparent": p.traceparent()}})
	if err == nil {
		t.Fatal("no error for an unknown tool")
	}
	s = childOf(t, r, p, "tools/call no-such-tool")
	code, _ := s.Attrs["rpc.response.status_code"].(string)
	if code == "" || s.Attrs["error.type"] != code || s.Status.Code != "ERROR" || s.Status.Message == "" {
		t.Errorf("span %s, status %+v", s, s.Status)
	}
}
