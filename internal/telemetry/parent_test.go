package telemetry

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// remoteParent is a context whose span context is a caller's, sampled or
// not, with trace id tid.
func remoteParent(tid string, sampled bool) context.Context {
	flags := "-00"
	if sampled {
		flags = "-01"
	}
	return propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": "00-" + tid + "-00f067aa0ba902b7" + flags, "tracestate": "caller=1"})
}

// sampledOf counts the spans of n decisions of s under parent.
func sampledOf(s sdktrace.Sampler, parent context.Context, n int) int {
	tid := trace.SpanContextFromContext(parent).TraceID()
	k := 0
	for range n {
		if s.ShouldSample(sdktrace.SamplingParameters{ParentContext: parent, TraceID: tid, Name: "x"}).Decision == sdktrace.RecordAndSample {
			k++
		}
	}
	return k
}

// TestSamplerCallerParent: an untrusted caller's sampled flag changes
// nothing, nor does a trace id OTel's ratio sampler always samples (its low
// 63 bits zero): at ratio 0.01 about 1 % of its requests are sampled; a
// trusted one's flag decides, and a local parent's decision is followed.
func TestSamplerCallerParent(t *testing.T) {
	const n = 20000
	lucky := "4bf92f3577b34da60000000000000000" // TraceIDRatioBased samples it at any ratio
	for _, tc := range []struct {
		name    string
		ratio   float64
		trust   bool
		sampled bool
		lo, hi  int
	}{
		{"untrusted, sampled, 1e-18", 1e-18, false, true, 0, 0},
		{"untrusted, sampled, 0.01", 0.01, false, true, 100, 320}, // mean 200, sd 14
		{"untrusted, not sampled, 1", 1, false, false, n, n},
		{"trusted, sampled, 1e-18", 1e-18, true, true, n, n},
		{"trusted, not sampled, 1", 1, true, false, 0, 0},
	} {
		if got := sampledOf(sampler(tc.ratio, tc.trust), remoteParent(lucky, tc.sampled), n); got < tc.lo || got > tc.hi {
			t.Errorf("%s: %d of %d sampled, want %d to %d", tc.name, got, n, tc.lo, tc.hi)
		}
	}
	// A local parent (the mux's own SERVER span) is followed.
	local := trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(remoteParent(lucky, true)).WithRemote(false))
	if got := sampledOf(sampler(1e-18, false), local, 100); got != 100 {
		t.Errorf("a sampled local parent: %d of 100 sampled", got)
	}
}

// TestParentOf: the trace context a SERVER span continues keeps a trusted
// parent's tracestate only, and never baggage; _meta wins over headers.
func TestParentOf(t *testing.T) {
	h := http.Header{"Traceparent": {"00-h-h-01"}, "Tracestate": {"h=1"}, "Baggage": {"b=1"}}
	meta := func() propagation.MapCarrier {
		return propagation.MapCarrier{"traceparent": "00-m-m-01", "tracestate": "m=1", "baggage": "b=2"}
	}
	for _, tc := range []struct {
		trust bool
		c     propagation.MapCarrier
		want  string
	}{
		{false, meta(), "00-m-m-01||"},
		{true, meta(), "00-m-m-01|m=1|"},
		{false, nil, "00-h-h-01||"},
		{true, nil, "00-h-h-01|h=1|"},
	} {
		tel := &Telemetry{trust: tc.trust}
		c := tel.parentOf(tc.c, h)
		if got := c["traceparent"] + "|" + c["tracestate"] + "|" + c["baggage"]; got != tc.want {
			t.Errorf("trust=%v: %q, want %q", tc.trust, got, tc.want)
		}
	}
	if c := (*Telemetry)(nil).parentOf(nil, http.Header{"Baggage": {"b=1"}}); c != nil {
		t.Errorf("no traceparent: %v", c)
	}
}

// TestInjectMetaWithoutSpan: with no span of the mux's, a forwarded
// request's _meta loses the caller's trace context, in any spelling, but
// for a trusted parent's traceparent and tracestate; other members stay.
func TestInjectMetaWithoutSpan(t *testing.T) {
	in := json.RawMessage(`{"name":"x","_meta":{"progressToken":7,"traceparent":"00-a-b-01","tracestate":"s=1","baggage":"b=1","BAGGAGE":"b=2","Trace_State":"s=2"}}`)
	for tel, want := range map[*Telemetry]string{
		nil:           `{"_meta":{"progressToken":7},"name":"x"}`,
		{}:            `{"_meta":{"progressToken":7},"name":"x"}`,
		{trust: true}: `{"_meta":{"progressToken":7,"traceparent":"00-a-b-01","tracestate":"s=1"},"name":"x"}`,
	} {
		if got := string(tel.InjectMeta(context.Background(), in)); got != want {
			t.Errorf("trusted=%v: %s, want %s", tel.trusted(), got, want)
		}
	}
	plain := json.RawMessage(`{"name":"x","_meta":{"progressToken":7}}`)
	if got := (*Telemetry)(nil).InjectMeta(context.Background(), plain); string(got) != string(plain) {
		t.Errorf("a _meta without trace context changed: %s", got)
	}
}
