package telemetry

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// A caller's trace context is what the caller says, and the caller is not
// the operator. Unless Options.TrustParent says its callers' parents are
// trusted (a front that traces them, say):
//
//   - its traceparent is continued — the SERVER span is its child, so the
//     traces join — but its sampled flag decides nothing: the operator's
//     sample ratio does, by a random draw per request (not by the trace
//     id, which the caller picks), and what goes upstream is the mux's own
//     span context with the mux's decision;
//   - its tracestate is dropped.
//
// A caller's baggage is never read nor sent upstream, trusted or not: it is
// the caller's say about the request, which an upstream would take as the
// operator's. With export off the mux starts no span: a trusted parent's
// traceparent and tracestate go upstream as the caller sent them, an
// untrusted one's not at all.

// traceKeys are the _meta members that carry trace context (SEP-414): a
// forwarded request's are the mux's, never its caller's (but for a trusted
// parent's when the mux has no span of its own), in any spelling an
// upstream's decoder could read as one of them (wire.FoldName).
var traceKeys = []string{"traceparent", "tracestate", "baggage"}

// isTraceKey reports whether a _meta member name is one of traceKeys to a
// lenient decoder (wire.FoldName upper-cases ASCII).
func isTraceKey(key string) bool {
	switch wire.FoldName(key) {
	case "TRACEPARENT", "TRACESTATE", "BAGGAGE":
		return true
	}
	return false
}

// trusted reports whether t takes its callers' trace context as the
// operator's (Options.TrustParent).
func (t *Telemetry) trusted() bool { return t != nil && t.trust }

// parentOf returns the trace context a SERVER span continues: the
// request's _meta's (c), else its headers' (h); without the tracestate of
// a parent not trusted, and never baggage.
func (t *Telemetry) parentOf(c propagation.MapCarrier, h http.Header) propagation.MapCarrier {
	if c == nil && h != nil && h.Get("Traceparent") != "" {
		c = propagation.MapCarrier{"traceparent": h.Get("Traceparent"), "tracestate": h.Get("Tracestate")}
	}
	if c == nil {
		return nil
	}
	delete(c, "baggage")
	if !t.trusted() {
		delete(c, "tracestate")
	}
	return c
}

// callerMeta returns params as they go upstream when the mux has no span
// of its own to send: without the caller's trace context in _meta, but for
// a trusted parent's traceparent and tracestate.
func (t *Telemetry) callerMeta(params json.RawMessage) json.RawMessage {
	trust := t.trusted()
	return wire.DropMeta(params, `"_meta"`, func(k string) bool {
		return isTraceKey(k) && !(trust && (k == "traceparent" || k == "tracestate"))
	})
}

// sampler is the operator's sampler: new traces at ratio (by trace id, as
// OTel's TraceIDRatioBased does), a local parent's decision followed, and a
// caller's (remote) parent's followed only when trusted; an untrusted one
// is sampled at ratio by a random draw.
func sampler(ratio float64, trust bool) sdktrace.Sampler {
	root := sdktrace.TraceIDRatioBased(ratio)
	if trust {
		return sdktrace.ParentBased(root)
	}
	draw := drawSampler{bound: uint64(ratio * (1 << 63))}
	return sdktrace.ParentBased(root, sdktrace.WithRemoteParentSampled(draw), sdktrace.WithRemoteParentNotSampled(draw))
}

// drawSampler samples a span by a random draw at a ratio: what a caller
// sends cannot change the odds.
type drawSampler struct {
	bound uint64 // sampled when a random 63-bit number is below it
}

func (s drawSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	d := sdktrace.Drop
	if rand.Uint64()>>1 < s.bound {
		d = sdktrace.RecordAndSample
	}
	return sdktrace.SamplingResult{Decision: d, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
}

func (s drawSampler) Description() string {
	return "CallerParentRatio{" + strconv.FormatFloat(float64(s.bound)/(1<<63), 'g', -1, 64) + "}"
}
