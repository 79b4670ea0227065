package telemetry

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// Target fills op's tool, prompt or resource URI from a request's raw
// params (the request goes to method).
func (o *Op) Target(method string, params json.RawMessage) {
	switch method {
	case "tools/call", "prompts/get", "resources/read", "resources/subscribe", "resources/unsubscribe":
	default:
		return
	}
	var p struct {
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	_ = sjson.Unmarshal(params, &p) // segmentio's: a fraction of encoding/json's cost on every upstream call
	switch method {
	case "tools/call":
		o.Tool = p.Name
	case "prompts/get":
		o.Prompt = p.Name
	default:
		o.URI = p.URI
	}
}

// SetURL fills op's server address and port from an HTTP server's URL
// (the scheme's default port when it names none).
func (o *Op) SetURL(raw string) {
	pu, err := url.Parse(raw)
	if err != nil {
		return
	}
	port, _ := strconv.Atoi(pu.Port())
	if port == 0 {
		port = 80
		if pu.Scheme == "https" {
			port = 443
		}
	}
	o.Address, o.Port = pu.Hostname(), port
}

// OfRequest describes a request the SDK decoded (method, its params and
// h, the headers it came with) for its SERVER span.
func OfRequest(method string, req mcp.Request, h http.Header) Op {
	op := Op{Method: method, Transport: "tcp", Protocol: protocolLabel(h.Get("Mcp-Protocol-Version"))}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && ss != nil {
		op.Session = ss.ID()
	}
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() { // a typed nil, for a request without params
		return op
	}
	switch p := p.(type) {
	case *mcp.CallToolParamsRaw:
		op.Tool = p.Name
	case *mcp.GetPromptParams:
		op.Prompt = p.Name
	case *mcp.ReadResourceParams:
		op.URI = p.URI
	case *mcp.SubscribeParams:
		op.URI = p.URI
	case *mcp.UnsubscribeParams:
		op.URI = p.URI
	}
	return op
}

// MetaOf is the _meta of an SDK request's params (nil for none).
func MetaOf(req mcp.Request) map[string]any {
	p := req.GetParams()
	if p == nil || reflect.ValueOf(p).IsNil() {
		return nil
	}
	return p.GetMeta()
}

// ToolError reports whether an SDK result is a tool error (isError).
func ToolError(res mcp.Result) bool {
	switch r := res.(type) {
	case *mcp.CallToolResult:
		return r != nil && r.IsError
	case *mcpwire.RawResult:
		return r != nil && wire.IsToolError(r.Raw)
	}
	return false
}

// protocolLabel is a protocol version header as a label: a version of
// MCP's, else bounds.Unknown (the header is the caller's to choose).
func protocolLabel(v string) string {
	switch v {
	case "", "2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28":
		return v
	}
	return bounds.Unknown
}
