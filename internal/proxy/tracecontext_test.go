package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Issue 32, weak findings: a caller's trace context. Its traceparent is
// continued (traces join) but, from a parent the operator does not trust,
// its sampled flag decides nothing (the operator's sample_ratio does), its
// tracestate is dropped, and its baggage never goes upstream.

const (
	callerTraceID     = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpanID      = "00f067aa0ba902b7"
	callerTraceparent = "00-" + callerTraceID + "-" + callerSpanID + "-01" // sampled
)

// callerMeta is a caller's _meta trace context: a sampled traceparent,
// its own tracestate and baggage (also spelled as a lenient decoder might
// read it).
const callerMeta = `"_meta":{"traceparent":"` + callerTraceparent + `","tracestate":"caller=evil","baggage":"tenant=other","BAGGAGE":"tenant=folded","TraceState":"caller=folded"}`

// callerTraceHeaders are the same as HTTP headers.
var callerTraceHeaders = map[string]string{"Traceparent": callerTraceparent, "Tracestate": "caller=evil", "Baggage": "tenant=other"}

// traceCall sends one tools/call of web_echo, with the caller's trace
// context in its _meta and headers; each is one way a call reaches the
// call path.
type traceCall struct {
	name string
	call func(t *testing.T)
}

// traceCalls are the 2025-11-25 fast path, the SDK path (a 2024-11-05
// session) and the 2026-07-28 fast path of the mux at base.
func traceCalls(t *testing.T, base string) []traceCall {
	t.Helper()
	session := func(version string) func(t *testing.T) {
		sid := rawSession(t, base, version)
		return func(t *testing.T) {
			hdr := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": version}
			for k, v := range callerTraceHeaders {
				hdr[k] = v
			}
			status, _, body := rawRequest(t, http.MethodPost, base+"/mcp", hdr,
				`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"x"},`+callerMeta+`}}`)
			if r := reply(t, body); status != http.StatusOK || r.Error != nil || !strings.Contains(string(r.Result), `"x"`) {
				t.Fatalf("%s call: HTTP %d %s", version, status, body)
			}
		}
	}
	modern := func(t *testing.T) {
		hdr := modernHeaders("tools/call", "web_echo")
		for k, v := range callerTraceHeaders {
			hdr[k] = v
		}
		body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"x"},` +
			strings.TrimSuffix(modernMeta("{}"), "}") + "," + strings.TrimPrefix(callerMeta, `"_meta":{`) + `}}`
		status, _, out := rawRequest(t, http.MethodPost, base+"/mcp", hdr, body)
		if r := reply(t, out); status != http.StatusOK || r.Error != nil {
			t.Fatalf("2026-07-28 call: HTTP %d %s", status, out)
		}
	}
	return []traceCall{{"2025-11-25 fast path", session("2025-11-25")}, {"SDK path", session("2024-11-05")}, {"2026-07-28", modern}}
}

// exportingMux is a mux in front of upstream exporting to r at ratio, with
// no OTEL_* variable set.
func exportingMux(t *testing.T, r *otlptest.Receiver, upstream string, ratio float64, trust bool) *mux {
	t.Helper()
	return startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, upstream),
		proxy.Options{Telemetry: telemetry.Options{Enabled: true, Endpoint: r.Endpoint(), SampleRatio: ratio, TrustParent: trust, Version: "test",
			Env: func(string) (string, bool) { return "", false }}})
}

// closeMux closes m, which flushes every span it still holds.
func closeMux(t *testing.T, m *mux) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := m.srv.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// muxSpans are the spans of service mcp-mux among spans.
func muxSpans(spans []otlptest.Span) []otlptest.Span {
	var out []otlptest.Span
	for _, s := range spans {
		if s.Service() == "mcp-mux" {
			out = append(out, s)
		}
	}
	return out
}

// TestCallerSampledTraceparentUntrusted: at a sample ratio that samples
// nothing, calls that carry a caller's sampled traceparent export no span
// (before: every call's SERVER and CLIENT spans), on every path of both
// eras; a mux that trusts its callers' parents (telemetry.trust_parent)
// exports them, each SERVER span the child of the caller's.
func TestCallerSampledTraceparentUntrusted(t *testing.T) {
	const calls = 10
	upstream := mcptest.ServeHTTPBothEras(t, mcptest.NewServer("web")).URL + "/mcp"
	for _, trust := range []bool{false, true} {
		t.Run(fmt.Sprintf("trust_parent=%v", trust), func(t *testing.T) {
			r := otlptest.Start(t)
			m := exportingMux(t, r, upstream, 1e-18, trust)
			paths := traceCalls(t, m.ts.URL)
			for _, p := range paths {
				for range calls {
					p.call(t)
				}
			}
			closeMux(t, m)
			spans := muxSpans(r.Spans())
			servers := count(spans, "SERVER", "", "tools/call web_echo")
			if !trust {
				if len(spans) != 0 {
					t.Fatalf("%d caller-sampled calls at sample ratio 1e-18 exported %d spans (%d SERVER), the first:\n%s",
						calls*len(paths), len(spans), servers, otlptest.Dump(spans[:1]))
				}
				return
			}
			if servers != calls*len(paths) {
				t.Fatalf("a trusted parent's sampled flag: %d SERVER spans for %d calls", servers, calls*len(paths))
			}
			for _, s := range spans {
				if s.Kind == "SERVER" && (s.TraceID != callerTraceID || s.ParentSpanID != callerSpanID) {
					t.Fatalf("SERVER span %s/%s is not the caller's child", s.TraceID, s.ParentSpanID)
				}
			}
		})
	}
}

// traceRecorder keeps the _meta and the trace headers of every tools/call
// an upstream gets.
type traceRecorder struct {
	mu    sync.Mutex
	metas []mcp.Meta
	hdrs  []http.Header
}

// recordingUpstream is mcptest's "web" server, in both eras, recording
// what its tools/calls carry.
func recordingUpstream(t *testing.T) (string, *traceRecorder) {
	rec := &traceRecorder{}
	s := mcptest.NewServer("web")
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/call" {
				var h http.Header
				if ex := req.GetExtra(); ex != nil {
					h = ex.Header.Clone()
				}
				rec.mu.Lock()
				rec.metas, rec.hdrs = append(rec.metas, req.GetParams().GetMeta()), append(rec.hdrs, h)
				rec.mu.Unlock()
			}
			return next(ctx, method, req)
		}
	})
	return mcptest.ServeHTTPBothEras(t, s).URL + "/mcp", rec
}

// take returns what was recorded since the last take.
func (r *traceRecorder) take() ([]mcp.Meta, []http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, h := r.metas, r.hdrs
	r.metas, r.hdrs = nil, nil
	return m, h
}

// TestCallerBaggageAndTracestateNotForwarded: a caller's baggage (in _meta,
// however it is spelled, and in the headers) never reaches the upstream,
// nor does its tracestate from a parent not trusted; its trace id does
// when the mux traces, so traces still join. With telemetry off, on, and
// on trusting the parent; on every path of both eras.
func TestCallerBaggageAndTracestateNotForwarded(t *testing.T) {
	for _, tc := range []struct {
		name        string
		tel         bool
		trust       bool
		wantState   string // the tracestate the upstream gets ("" for none)
		wantTraceID bool   // the upstream's traceparent continues the caller's trace
		wantSampled bool   // and is sampled
	}{
		{"telemetry off", false, false, "", false, false}, // no span of the mux's to continue the trace
		{"untrusted parent", true, false, "", true, false},
		{"trusted parent", true, true, "caller=evil", true, true},
		{"telemetry off, trusted parent", false, true, "caller=evil", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up, rec := recordingUpstream(t)
			var m *mux
			if tc.tel {
				m = exportingMux(t, otlptest.Start(t), up, 1e-18, tc.trust)
			} else {
				m = startMux(t, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up),
					proxy.Options{Telemetry: telemetry.Options{TrustParent: tc.trust, Env: func(string) (string, bool) { return "", false }}})
			}
			for _, p := range traceCalls(t, m.ts.URL) {
				p.call(t)
				metas, hdrs := rec.take()
				if len(metas) != 1 {
					t.Fatalf("%s: the upstream got %d calls", p.name, len(metas))
				}
				checkUpstreamTrace(t, p.name, metas[0], hdrs[0], tc.wantState, tc.wantTraceID, tc.wantSampled)
			}
		})
	}
}

// checkUpstreamTrace checks the trace context one upstream call carried.
func checkUpstreamTrace(t *testing.T, path string, meta mcp.Meta, h http.Header, wantState string, wantTraceID, wantSampled bool) {
	t.Helper()
	for k, v := range meta {
		if wire.FoldName(k) == wire.FoldName("baggage") {
			t.Errorf("%s: the upstream's _meta has %s=%v", path, k, v)
		}
		if wire.FoldName(k) == wire.FoldName("tracestate") && (k != "tracestate" || v != wantState) {
			t.Errorf("%s: the upstream's _meta has %s=%v, want tracestate %q", path, k, v, wantState)
		}
	}
	if v := h.Values("Baggage"); len(v) > 0 {
		t.Errorf("%s: the upstream got Baggage: %q", path, v)
	}
	if v := h.Get("Tracestate"); v != "" && v != wantState {
		t.Errorf("%s: the upstream got Tracestate: %q, want %q", path, v, wantState)
	}
	if got, _ := meta["tracestate"].(string); got != wantState {
		t.Errorf("%s: the upstream's _meta tracestate %q, want %q", path, got, wantState)
	}
	tp, _ := meta["traceparent"].(string)
	if wantTraceID != strings.HasPrefix(tp, "00-"+callerTraceID+"-") {
		t.Errorf("%s: the upstream's traceparent %q; continues the caller's trace: want %v", path, tp, wantTraceID)
	}
	if wantTraceID && wantSampled != strings.HasSuffix(tp, "-01") {
		t.Errorf("%s: the upstream's traceparent %q; sampled: want %v", path, tp, wantSampled)
	}
}
