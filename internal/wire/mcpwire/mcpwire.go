// Package mcpwire is the half of mcp-mux's JSON-RPC output layer that needs
// net/http or go-sdk: RawResult for SDK handlers and WriteError for HTTP
// handlers. Every envelope is built by package wire, which stays a leaf that
// imports neither (config reads it).
package mcpwire

import (
	"encoding/json"
	"net/http"

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
