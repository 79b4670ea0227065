// Package mcpwire is the half of mcp-mux's JSON-RPC output layer that needs
// net/http or go-sdk: RawResult for SDK handlers, WriteError for HTTP
// handlers, and AcceptsBoth, the Accept rule of a POST. Every envelope is built by package wire, which stays a leaf that
// imports neither (config reads it).
package mcpwire

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// RawResult is an MCP result sent exactly as the bytes it holds.
type RawResult struct {
	mcp.ResultBase
	Raw json.RawMessage
}

// MarshalJSON returns the bytes unchanged.
func (r *RawResult) MarshalJSON() ([]byte, error) { return r.Raw, nil }

// WriteError answers an HTTP request with a JSON-RPC error response and the
// given HTTP status.
func WriteError(w http.ResponseWriter, status int, id json.RawMessage, code int64, msg string, data json.RawMessage) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(wire.AppendError(nil, id, code, msg, data))
}

// AcceptsBoth mirrors go-sdk's Accept check for POSTs: the client takes
// both JSON and event streams.
func AcceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, v := range values {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}
