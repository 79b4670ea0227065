package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// callerTrace starts the caller's own span, exported to r, and returns its
// context as _meta's trace members.
func callerTrace(t *testing.T, r *otlptest.Receiver) (trace.Span, map[string]string) {
	t.Helper()
	exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(r.Endpoint()+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(resource.NewSchemaless()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, span := tp.Tracer("caller").Start(context.Background(), "agent turn")
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(trace.ContextWithSpan(context.Background(), span), c)
	return span, c
}

// tracedMux runs a mux exporting its spans to r, in front of a traced HTTP
// upstream (both eras) and a traced stdio one.
func tracedMux(t *testing.T, r *otlptest.Receiver) *mux {
	t.Helper()
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20") // the batch processor exports within 20 ms
	up := mcptest.ServeHTTPBothEras(t, mcptest.TracedServer(t, r.Endpoint(), "web"))
	cfg := fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}, %s}}`, up.URL+"/mcp",
		stdioServerJSON(t, "local", mcptest.StdioOptions{TraceEndpoint: r.Endpoint()}, ""))
	return startMux(t, cfg, proxy.Options{Telemetry: telemetry.Options{Enabled: true, Endpoint: r.Endpoint(), Version: "test",
		Env: func(string) (string, bool) { return "", false }}})
}

// TestTraceEndToEnd: a call made inside a caller's trace reaches the OTLP
// receiver as one trace — the caller's span, the mux's SERVER span, its
// CLIENT span and the upstream's own span, each the child of the one
// before — through an HTTP and a stdio upstream, from a client of each era.
func TestTraceEndToEnd(t *testing.T) {
	r := otlptest.Start(t)
	m := tracedMux(t, r)
	for _, tc := range []struct {
		era, tool, transport string
	}{
		{"2025-11-25", "web_echo", "tcp"}, {"2025-11-25", "local_echo", "pipe"},
		{"2026-07-28", "web_echo", "tcp"}, {"2026-07-28", "local_echo", "pipe"},
	} {
		t.Run(tc.era+" "+tc.tool, func(t *testing.T) {
			caller, meta := callerTrace(t, r)
			traceID := caller.SpanContext().TraceID().String()
			callTraced(t, m, tc.era, tc.tool, meta)
			caller.End()
			spans := r.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool {
				in := otlptest.InTrace(all, traceID)
				return count(in, "SERVER", "mcp-mux", "") == 1 && count(in, "CLIENT", "mcp-mux", "") == 1 && count(in, "SERVER", "", "tools/call echo") == 1
			})
			in := otlptest.InTrace(spans, traceID)
			server := oneSpan(t, in, "SERVER", "mcp-mux")
			client := oneSpan(t, in, "CLIENT", "mcp-mux")
			upstream := namedSpan(t, in, "SERVER", strings.TrimSuffix(tc.tool, "_echo"), "tools/call echo")
			if server.ParentSpanID != caller.SpanContext().SpanID().String() || client.ParentSpanID != server.SpanID || upstream.ParentSpanID != client.SpanID {
				t.Fatalf("not one chain caller → mux server → mux client → upstream:\n%s", otlptest.Dump(in))
			}
			if server.Name != "tools/call "+tc.tool || client.Name != "tools/call echo" {
				t.Errorf("span names %q, %q", server.Name, client.Name)
			}
			wantAttrs(t, server, map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": tc.tool, "gen_ai.operation.name": "execute_tool",
				"mcp.protocol.version": tc.era, "network.transport": "tcp"})
			wantAttrs(t, client, map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo", "gen_ai.operation.name": "execute_tool",
				"network.transport": tc.transport, "mcp_mux.server": strings.TrimSuffix(tc.tool, "_echo")})
			for _, k := range []string{"jsonrpc.request.id", "user.id"} {
				if server.Attrs[k] == nil {
					t.Errorf("the SERVER span has no %s: %v", k, server.Attrs)
				}
			}
			if tc.era == "2025-11-25" && server.Attrs["mcp.session.id"] == nil {
				t.Errorf("the SERVER span of a session has no mcp.session.id: %v", server.Attrs)
			}
			if tc.transport == "tcp" && client.Attrs["server.address"] != "127.0.0.1" {
				t.Errorf("the CLIENT span of an HTTP upstream: server.address %v", client.Attrs["server.address"])
			}
			if tc.transport == "tcp" && upstream.Attrs[mcptest.AttrHeaderTraceparent] != upstream.Attrs[mcptest.AttrMetaTraceparent] {
				t.Errorf("over HTTP the trace context goes in _meta and in the headers alike: %v", upstream.Attrs)
			}
		})
	}
}

// callTraced calls tool with the trace context meta in its _meta, as a
// client of era.
func callTraced(t *testing.T, m *mux, era, tool string, meta map[string]string) {
	t.Helper()
	if era == "2026-07-28" {
		var b strings.Builder
		for k, v := range meta {
			fmt.Fprintf(&b, `,%q:%q`, k, v)
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"text":"x"},` +
			strings.TrimSuffix(modernMeta("{}"), "}") + b.String() + `}}}`
		h := modernHeaders("tools/call", tool)
		status, _, out := rawRequest(t, "POST", m.ts.URL+"/mcp", h, body)
		if rep := reply(t, out); status != 200 || rep.Error != nil {
			t.Fatalf("modern call: HTTP %d %s", status, out)
		}
		return
	}
	cs := connect(t, m.ts.URL, nil)
	mm := mcp.Meta{}
	for k, v := range meta {
		mm[k] = v
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}, Meta: mm})
	if err != nil || res.IsError {
		t.Fatalf("call %s: %v %+v", tool, err, res)
	}
}

// oneSpan returns the one span of kind whose service is service.
func oneSpan(t *testing.T, spans []otlptest.Span, kind, service string) otlptest.Span {
	t.Helper()
	var found []otlptest.Span
	for _, s := range spans {
		if s.Kind == kind && s.Service() == service {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d %s spans of %s in the trace:\n%s", len(found), kind, service, otlptest.Dump(spans))
	}
	return found[0]
}

// count counts the spans of kind, of service and named name ("": any).
func count(spans []otlptest.Span, kind, service, name string) int {
	n := 0
	for _, s := range spans {
		if s.Kind == kind && (service == "" || s.Service() == service) && (name == "" || s.Name == name) {
			n++
		}
	}
	return n
}

// namedSpan returns the one span of kind, service and name.
func namedSpan(t *testing.T, spans []otlptest.Span, kind, service, name string) otlptest.Span {
	t.Helper()
	var named []otlptest.Span
	for _, s := range spans {
		if s.Name == name {
			named = append(named, s)
		}
	}
	return oneSpan(t, named, kind, service)
}

// wantAttrs checks attributes by name.
func wantAttrs(t *testing.T, s otlptest.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got := s.Attrs[k]; got != v {
			t.Errorf("%s span %q: %s = %v, want %v", s.Kind, s.Name, k, got, v)
		}
	}
}

// TestTelemetryKeepsSecrets: no credential, argument or result reaches a
// span (name, attribute, event, status) or a metric label, and a caller's
// id appears only hashed. The call carries a static header credential, a
// secrets-carrier credential and an API key, an argument and a result
// (echo answers it back) that each hold a marker.
func TestTelemetryKeepsSecrets(t *testing.T) {
	r := otlptest.Start(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	up := mcptest.ServeHTTPBothEras(t, mcptest.TracedServer(t, r.Endpoint(), "web"))
	const (
		static  = "static-cred-7f3a91"
		carried = "carried-cred-2b8e44"
		apiKey  = "api-key-6c1d07-0123456789"
		arg     = "argument-marker-93d1"
	)
	cfg := fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q, "headers": {"X-Static": %q},
		"headers_from_context": {"headers": {"X-Carried": "tok"}}}},
		"inbound": {"auth": {"mode": "api_keys", "keys": {"alice-the-user": %q}}}}`, up.URL+"/mcp", static, apiKey)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	ids := secret.NewIDHash("telemetry-test-shared-key")
	a, err := audit.New(audit.Options{Enabled: true, Output: auditPath, Detail: audit.DetailFull, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	m := startMux(t, cfg, proxy.Options{Telemetry: telemetry.Options{Enabled: true, Endpoint: r.Endpoint(), UserID: "hashed", IDs: ids,
		Env: func(string) (string, bool) { return "", false }}, Audit: a})
	caller, meta := callerTrace(t, r)
	c := mcp.NewClient(&mcp.Implementation{Name: "secrets", Version: "1"}, nil)
	hc := &http.Client{Transport: headerRT{"Authorization": "Bearer " + apiKey, "X-Mux-Secrets": `{"tok":"` + carried + `"}`}}
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
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_headers", Meta: mm})
	if err != nil || !strings.Contains(fmt.Sprint(res.Content[0]), carried) {
		t.Fatalf("the call did not carry the credentials it is meant to (so the test proves nothing): %v %+v", err, res)
	}
	if res, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_echo", Arguments: map[string]any{"text": arg}, Meta: mm}); err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	caller.End()
	traceID := caller.SpanContext().TraceID().String()
	spans := r.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool {
		in := otlptest.InTrace(all, traceID)
		return count(in, "SERVER", "mcp-mux", "") == 2 && count(in, "CLIENT", "mcp-mux", "") == 2
	})
	var mux []otlptest.Span
	for _, s := range spans {
		if s.Service() == "mcp-mux" {
			mux = append(mux, s)
		}
	}
	if len(mux) < 4 {
		t.Fatalf("%d mux spans:\n%s", len(mux), otlptest.Dump(spans))
	}
	recs, records := auditRecords(t, a, auditPath)
	if len(recs) != 2 || recs[0].TraceID != traceID || recs[1].TraceID != traceID {
		t.Errorf("audit records %+v, want two in trace %s", recs, traceID)
	}
	dump := otlptest.Dump(mux) + scrape(t, m.ts.URL) + records
	for _, secret := range []string{static, carried, apiKey, arg, "alice-the-user"} {
		if strings.Contains(dump, secret) {
			t.Errorf("%q reached a mux span, a metric or an audit record:\n%s", secret, grepLines(dump, secret))
		}
	}
	if hashed := ids.Of("alice-the-user"); !strings.Contains(otlptest.Dump(mux), "user.id="+hashed) || recs[0].Caller != hashed {
		t.Errorf("the mux's spans and the audit records do not both name the caller %s:\n%s\n%+v", hashed, otlptest.Dump(mux), recs)
	}
}

// headerRT adds headers to every request (on the tests' transport).
type headerRT map[string]string

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return testHTTP.Transport.RoundTrip(r)
}

// A server that opts in ("telemetry": {"arguments": true, "results":
// true}) has its calls' arguments and results on the mux's SERVER span as
// gen_ai.tool.call.arguments and .result, with the credentials the mux
// knows scrubbed; a server that does not, has neither.
func TestSpanContentOptIn(t *testing.T) {
	r := otlptest.Start(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	const static = "static-cred-content-9a7b"
	cfg := fmt.Sprintf(`{"mcpServers": {
		"open": {"type": "http", "url": %q, "headers": {"X-Static": %q}, "telemetry": {"arguments": true, "results": true}},
		"closed": {"type": "http", "url": %q}}}`, up.URL+"/mcp", static, up.URL+"/mcp")
	m := startMux(t, cfg, proxy.Options{Telemetry: telemetry.Options{Enabled: true, Endpoint: r.Endpoint(),
		Env: func(string) (string, bool) { return "", false }}})
	caller, meta := callerTrace(t, r)
	callTracedArgs(t, m, "open_echo", meta, "says "+static)
	callTracedArgs(t, m, "closed_echo", meta, "closed-text-31f0")
	caller.End()
	traceID := caller.SpanContext().TraceID().String()
	spans := r.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool {
		return count(otlptest.InTrace(all, traceID), "SERVER", "mcp-mux", "") == 2
	})
	in := otlptest.InTrace(spans, traceID)
	open := namedSpan(t, in, "SERVER", "mcp-mux", "tools/call open_echo")
	args, _ := open.Attrs["gen_ai.tool.call.arguments"].(string)
	res, _ := open.Attrs["gen_ai.tool.call.result"].(string)
	if !sameJSON(json.RawMessage(args), `{"text":"says [REDACTED]"}`) || !strings.Contains(res, "says [REDACTED]") {
		t.Errorf("opted-in span: arguments %q, result %q", args, res)
	}
	closed := namedSpan(t, in, "SERVER", "mcp-mux", "tools/call closed_echo")
	if _, ok := closed.Attrs["gen_ai.tool.call.arguments"]; ok || strings.Contains(otlptest.Dump(spans), "closed-text-31f0") {
		t.Errorf("a server that did not opt in has its content on a span: %v", closed.Attrs)
	}
	if strings.Contains(otlptest.Dump(spans), static) {
		t.Errorf("the static credential reached a span")
	}
}

// callTracedArgs calls tool with text as its argument, in the trace meta.
func callTracedArgs(t *testing.T, m *mux, tool string, meta map[string]string, text string) {
	t.Helper()
	cs := connect(t, m.ts.URL, nil)
	mm := mcp.Meta{}
	for k, v := range meta {
		mm[k] = v
	}
	if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": text}, Meta: mm}); err != nil || res.IsError {
		t.Fatalf("call %s: %v %+v", tool, err, res)
	}
}

// /metrics in OpenMetrics (asked for with Accept) carries the trace id of
// a sampled call as the exemplar of its latency buckets: mcp-mux's own
// histogram and the convention's.
func TestMetricsExemplars(t *testing.T) {
	r := otlptest.Start(t)
	m := tracedMux(t, r)
	caller, meta := callerTrace(t, r)
	callTraced(t, m, "2025-11-25", "web_echo", meta)
	caller.End()
	traceID := caller.SpanContext().TraceID().String()
	req, _ := http.NewRequest(http.MethodGet, m.ts.URL+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	res, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/openmetrics-text") {
		t.Fatalf("Content-Type %q, want OpenMetrics", res.Header.Get("Content-Type"))
	}
	for _, series := range []string{`mcp_mux_tool_call_duration_seconds_bucket{outcome="ok",server="web"`, `mcp_server_operation_duration_seconds_bucket{`} {
		found := false
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, series) && strings.Contains(line, `trace_id="`+traceID+`"`) {
				found = true
			}
		}
		if !found {
			t.Errorf("no exemplar with trace %s on %s:\n%s", traceID, series, grepLines(string(body), strings.SplitN(series, "{", 2)[0]))
		}
	}
	if plain := scrape(t, m.ts.URL); strings.Contains(plain, "trace_id") {
		t.Errorf("the plain text format carries exemplars (it cannot): %s", grepLines(plain, "trace_id"))
	}
}

// hasEvent reports whether a span has an event named name.
func hasEvent(s otlptest.Span, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// The steps of a call besides its requests show in its trace: a
// discovery is an INTERNAL span of its own; an OAuth token fetched for a
// call, an input round a legacy client answers live, and a 2026-07-28
// call parked for the client's retry (and resumed by it) are events on
// the mux's SERVER span.
func TestTraceSteps(t *testing.T) {
	r := otlptest.Start(t)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20")
	legacy := mcptest.ServeHTTP(t, mcptest.NewServer("alpha"))
	// Tokens that expire at once: each call fetches one.
	tok := startTokenServer(t, "trace-tok", func(n int, _ *http.Request) (int, string, string) { return tokenJSON(fmt.Sprint("trace-tok-", n), 1) })
	cfg := fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q},
		"guarded": {"type": "http", "url": %q, "oauth": {"token_url": %q, "client_id": "mux", "client_secret": "s3cr3t-client"}}}}`,
		legacy.URL+"/mcp", mrtrServer(t), legacy.URL+"/mcp", tok.URL)
	m := startMux(t, cfg, proxy.Options{Telemetry: telemetry.Options{Enabled: true, Endpoint: r.Endpoint(),
		Env: func(string) (string, bool) { return "", false }}})
	url := m.ts.URL + "/mcp"

	caller, meta := callerTrace(t, r)
	traceID := caller.SpanContext().TraceID().String()
	cs := connect(t, m.ts.URL, &mcp.ClientOptions{
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		}})
	mm := mcp.Meta{"traceparent": meta["traceparent"]}
	for _, tool := range []string{"beta_ask", "guarded_echo"} {
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "x"}, Meta: mm}); err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", tool, err, res)
		}
	}
	// A 2026-07-28 client of a legacy upstream that elicits: parked, then resumed.
	const caps = `{"elicitation":{}}`
	traced := `,"_meta":{"traceparent":` + mustQuote(meta["traceparent"]) + `}`
	_, first := modernCall(t, url, nil, caps, "tools/call", "alpha_elicit", `"name":"alpha_elicit","arguments":{"tag":"t1"}`+traced)
	reqs, state := inputRequiredOf(t, first)
	var key string
	for k := range reqs {
		key = k
	}
	_, done := modernCall(t, url, nil, caps, "tools/call", "alpha_elicit", `"name":"alpha_elicit","arguments":{"tag":"t1"},"inputResponses":{"`+key+
		`":{"action":"accept","content":{"answer":"42"}}},"requestState":`+mustQuote(state)+traced)
	if done.Error != nil || !strings.Contains(string(done.Result), "elicited accept 42") {
		t.Fatalf("resumed call: %s %+v", done.Result, done.Error)
	}
	caller.End()

	spans := r.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool {
		return count(otlptest.InTrace(all, traceID), "SERVER", "mcp-mux", "") >= 4 && count(all, "INTERNAL", "mcp-mux", "discover guarded") > 0
	})
	if s := namedSpan(t, spans, "INTERNAL", "mcp-mux", "discover guarded"); s.Attrs["mcp_mux.server"] != "guarded" || s.ParentSpanID != "" || !hasEvent(s, "mcp_mux.oauth.token") {
		t.Errorf("discovery span %s: want a root span naming its server, with its token fetch", s)
	}
	in := otlptest.InTrace(spans, traceID)
	want := map[string]string{"tools/call beta_ask": "mcp_mux.input_required", "tools/call guarded_echo": "mcp_mux.oauth.token"}
	for name, event := range want {
		if s := namedSpan(t, in, "SERVER", "mcp-mux", name); !hasEvent(s, event) {
			t.Errorf("%s has no %s event: %s", name, event, s)
		}
	}
	var parked, resumed bool
	for _, s := range in {
		if s.Kind == "SERVER" && s.Name == "tools/call alpha_elicit" {
			parked = parked || hasEvent(s, "mcp_mux.call.parked")
			resumed = resumed || hasEvent(s, "mcp_mux.call.resumed")
		}
	}
	if !parked || !resumed {
		t.Errorf("parked %v, resumed %v:\n%s", parked, resumed, otlptest.Dump(in))
	}
	if strings.Contains(otlptest.Dump(spans), "s3cr3t-client") || strings.Contains(otlptest.Dump(spans), "trace-tok-") {
		t.Error("an OAuth secret or token reached a span")
	}
}
