package proxy

import (
	"github.com/mcp-mux/mcp-mux/proxy/callpath"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// setInstructions puts the current catalog's instructions (routing hints
// and, with tool_search, the deferred tool names) into an initialize
// result.
func (s *Server) setInstructions(res mcp.Result) {
	ir, ok := res.(*mcp.InitializeResult)
	if !ok {
		return
	}
	if text := s.rt.Load().Catalog.Load().Instructions(); text != "" {
		ir.Instructions = text
	}
}

// setCapabilities puts the current catalog's capabilities into an
// initialize result (callpath.SetCapabilities).
func (s *Server) setCapabilities(res mcp.Result) {
	callpath.SetCapabilities(s.rt.Load().Catalog.Load(), res)
}
