package mcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NewLeakyServer returns an MCP server whose errors echo every request
// header value it received (Authorization, a user_auth header, headers from
// the secrets carrier): tool leak_result answers a tool error result
// (isError) quoting them, tool leak_error a JSON-RPC error quoting them in
// its message and its data. A mux must scrub them before anything reaches a
// client or a log.
func NewLeakyServer(name string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "leak_result", Description: "A tool error quoting the request headers.", InputSchema: emptySchema()},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "denied: " + headerValues(req)}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "leak_error", Description: "A JSON-RPC error quoting the request headers.", InputSchema: emptySchema()},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			quoted := headerValues(req)
			data, _ := json.Marshal(map[string]string{"seen": quoted})
			return nil, &jsonrpc.Error{Code: -32001, Message: "denied: " + quoted, Data: data}
		})
	return s
}

// headerValues lists the request's header values, "Name=value" each, sorted.
func headerValues(req *mcp.CallToolRequest) string {
	var h http.Header
	if req.Extra != nil {
		h = req.Extra.Header
	}
	var out []string
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
