package upstream

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// clientSpan starts the CLIENT span of one request to the server on c
// (package telemetry).
func (u *Upstream) clientSpan(ctx context.Context, c *conn, method string, params json.RawMessage) (context.Context, telemetry.Span) {
	t := u.opts.Telemetry
	if !t.Enabled() {
		return ctx, telemetry.Span{}
	}
	op := telemetry.Op{Method: method, Server: u.opts.Name, Transport: "tcp", Protocol: VersionLegacy}
	op.Target(method, params)
	switch {
	case c.direct != nil:
		op.Protocol, op.Session = c.direct.protocol, c.direct.sessionID
		op.SetURL(u.opts.URL)
	case u.opts.Transport == Stdio:
		op.Transport = "pipe"
		if c.modern != nil {
			op.Protocol = VersionModern
		}
	default: // SSE
		op.SetURL(u.opts.URL)
	}
	return t.Client(ctx, op)
}
