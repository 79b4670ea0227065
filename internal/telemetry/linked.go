package telemetry

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"
)

// A durable task is polled later, on whichever replica holds its lease:
// its submit's span context is kept with the task as a W3C traceparent,
// and each poll or cancel call is the root of a new trace linked to it
// (OTel's guidance for work that outlives the request that asked for it).

// TaskAttr names a durable task's local id (never its remote id).
const TaskAttr = attribute.Key("mcp_mux.task.id")

// Traceparent is ctx's span context as a W3C traceparent, for a durable
// task to keep: "" unless t traces and the span context is valid and
// sampled.
func (t *Telemetry) Traceparent(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); t == nil || !t.tracing || !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return c["traceparent"]
}

// Linked starts an INTERNAL span as the root of a new trace, linked to
// the span traceparent names (no link when it does not parse).
func (t *Telemetry) Linked(ctx context.Context, name, traceparent string, attrs ...attribute.KeyValue) (context.Context, Span) {
	if t == nil || !t.tracing {
		return ctx, Span{}
	}
	opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...)}
	carrier := propagation.MapCarrier{"traceparent": traceparent}
	if l := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier)); l.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: l}))
	}
	ctx, s := t.tracer.Start(ctx, name, opts...)
	return ctx, Span{s: s}
}

// TaskAttrs are the attributes of a durable task's call: its local id, its
// server (mcp_mux.server) and the raw tool called (gen_ai.tool.name).
func TaskAttrs(id, server, tool string) []attribute.KeyValue {
	return []attribute.KeyValue{TaskAttr.String(id), ServerAttr.String(server), semconv.GenAIToolName(tool)}
}
