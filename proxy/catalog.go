package proxy

import (
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

// setCapabilities puts the catalog's capabilities into an initialize or
// server/discover result. Extensions are each added by their own file after
// it (advertiseTasks, modern_tasks.go), on server/discover only.
func (s *Server) setCapabilities(res mcp.Result) {
	caps := s.rt.Load().Catalog.Load().Capabilities() // a copy: the catalog's pointers are never written
	switch r := res.(type) {
	case *mcp.InitializeResult:
		r.Capabilities = &caps
	case *mcp.DiscoverResult:
		r.Capabilities = &caps
	}
}
