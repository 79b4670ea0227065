package callpath

import (
	"context"
	"encoding/json"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// maxContentAttr bounds a span's arguments or result attribute; larger
// content is left out.
const maxContentAttr = 4 << 10

// contentStage records a tools/call's arguments where its server opted in
// (config.ServerTelemetry): in its audit record and as the
// gen_ai.tool.call.arguments attribute of ctx's span; and its result, on
// success, as gen_ai.tool.call.result. Both are redacted of
// credential-named members and of the values the mux knows are
// credentials (the server's, and those the caller carried). It records
// what the caller sent, before fixed arguments. Left out when no server
// opted in.
func contentStage(s *Router) Stage {
	return Stage{
		Name:    "content",
		Methods: ToolCall,
		Needed:  contentOptedIn,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				tc := c.Backend.Config
				if tc == nil || (!tc.Telemetry.Arguments && !tc.Telemetry.Results) {
					return next(ctx, c)
				}
				if tc.Telemetry.Arguments && len(c.Args) > 0 {
					sc := c.scrubber()
					c.Record.Arguments(c.Args, sc)
					setContent(ctx, semconv.GenAIToolCallArgumentsKey.String, c.Args, sc)
				}
				raw, err := next(ctx, c)
				if err == nil && tc.Telemetry.Results && trace.SpanFromContext(ctx).IsRecording() {
					setContent(ctx, semconv.GenAIToolCallResultKey.String, raw, c.scrubber())
				}
				return raw, err
			}
		},
	}
}

// contentOptedIn reports whether a server of rt records call content.
func contentOptedIn(rt *Runtime) bool {
	for _, b := range rt.Backends {
		if b.Config != nil && (b.Config.Telemetry.Arguments || b.Config.Telemetry.Results) {
			return true
		}
	}
	return false
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

// scrubber knows c's server's credentials and the secrets its caller
// carried.
func (c *Call) scrubber() *secret.Scrubber {
	carried := http.Header{}
	for _, v := range c.Caller.Secrets {
		carried.Add("V", v)
	}
	return c.Backend.Up.Scrubber(carried)
}
