package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strconv"

	"github.com/mcp-mux/mcp-mux/telemetry"
)

// clientSpan starts the CLIENT span of one request to the server on c
// (package telemetry; nothing when telemetry is off).
func (u *Upstream) clientSpan(ctx context.Context, c *conn, method string, params json.RawMessage) (context.Context, telemetry.Span) {
	t := u.opts.Telemetry
	if !t.Enabled() {
		return ctx, telemetry.Span{}
	}
	op := telemetry.Op{Method: method, Server: u.opts.Name, Transport: "tcp"}
	switch method {
	case "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe":
		var p struct {
			Name string `json:"name"`
			URI  string `json:"uri"`
		}
		_ = json.Unmarshal(params, &p)
		if method == "tools/call" {
			op.Tool = p.Name
		} else if method == "prompts/get" {
			op.Prompt = p.Name
		}
		op.URI = p.URI
	}
	switch {
	case c.direct != nil:
		op.Protocol, op.Session = c.direct.protocol, c.direct.sessionID
		op.Address, op.Port = hostPort(u.opts.URL)
	case u.opts.Transport == Stdio:
		op.Transport, op.Protocol = "pipe", VersionLegacy
		if c.modern != nil {
			op.Protocol = VersionModern
		}
	default: // SSE
		op.Protocol = VersionLegacy
		op.Address, op.Port = hostPort(u.opts.URL)
	}
	return t.Client(ctx, op)
}

// hostPort returns a URL's host and port (its scheme's default when it
// names none).
func hostPort(raw string) (string, int) {
	pu, err := url.Parse(raw)
	if err != nil {
		return "", 0
	}
	port, _ := strconv.Atoi(pu.Port())
	if port == 0 {
		port = 80
		if pu.Scheme == "https" {
			port = 443
		}
	}
	return pu.Hostname(), port
}

// isToolError reports whether a tools/call result is a tool error.
func isToolError(raw json.RawMessage) bool {
	return bytes.Contains(raw, []byte(`"isError":true`))
}
