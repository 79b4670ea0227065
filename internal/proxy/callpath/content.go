package callpath

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// maxContentAttr bounds a span's arguments or result attribute; larger
// content is left out.
const maxContentAttr = 4 << 10

// content records a call's arguments where its server opted in
// (config.ServerTelemetry): in its audit entry and as the
// gen_ai.tool.call.arguments attribute of ctx's span, redacted of
// credential-named members and of the values the mux knows are
// credentials (the server's, and those the caller carried in h).
func (s *Router) content(ctx context.Context, b *Backend, rec *audit.Entry, h http.Header, args json.RawMessage) {
	if b.Config == nil || !b.Config.Telemetry.Arguments || len(args) == 0 {
		return
	}
	sc := s.scrubber(b, h)
	rec.Arguments(args, sc)
	setContent(ctx, semconv.GenAIToolCallArgumentsKey.String, args, sc)
}

// result sets a tool result as the gen_ai.tool.call.result attribute of
// ctx's span, redacted, where the call's server opted in.
func (s *Router) result(ctx context.Context, b *Backend, h http.Header, raw json.RawMessage) {
	if b.Config == nil || !b.Config.Telemetry.Results || !trace.SpanFromContext(ctx).IsRecording() {
		return
	}
	setContent(ctx, semconv.GenAIToolCallResultKey.String, raw, s.scrubber(b, h))
}

// setContent sets attr(raw redacted) on ctx's span when it records and
// raw redacts within the bound.
func setContent(ctx context.Context, attr func(string) attribute.KeyValue, raw json.RawMessage, sc *secret.Scrubber) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if red, err := secret.RedactJSON(raw, sc, maxContentAttr); err == nil {
		span.SetAttributes(attr(string(red)))
	}
}

// scrubber knows b's credentials and the secrets the caller carried in h.
func (s *Router) scrubber(b *Backend, h http.Header) *secret.Scrubber {
	carried := http.Header{}
	if name := s.rt.Load().Config.Inbound.SecretsHeader; name != "" && h != nil {
		if v := h.Get(name); v != "" {
			if m, err := headers.ParseSecrets(name, v); err == nil {
				for _, val := range m {
					carried.Add("V", val)
				}
			}
		}
	}
	return b.Up.Scrubber(carried)
}
