package proxy

import (
	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/catalog"
	"github.com/mcp-mux/mcp-mux/config"
)

// The catalog (package catalog) as this package uses it: routes lead to a
// *backend.
type (
	// muxCatalog is the aggregated catalog of one runtime.
	muxCatalog = catalog.Catalog[*backend]
	// route is one visible tool and where calls to it go.
	route = catalog.Route[*backend]
	// promotions are the deferred tools one session promoted.
	promotions = catalog.Promotions[*backend]
	// catalogPolicy is what a runtime's catalogs take from its config.
	catalogPolicy = catalog.Policy
)

// newCatalogPolicy compiles what a catalog takes from cfg besides each
// backend's own *config.Server: guardrails and tool_search; tasks is
// whether durable tasks are on.
func newCatalogPolicy(cfg *config.Config, tasks bool) *catalogPolicy {
	return catalog.NewPolicy(catalog.Options{Guardrails: cfg.Guardrails, ToolSearch: cfg.ToolSearch, Tasks: tasks})
}

// buildCatalog builds the catalog of the backends' last discoveries.
func buildCatalog(backends []*backend, pol *catalogPolicy, log hclog.Logger) *muxCatalog {
	src := make([]catalog.Source[*backend], len(backends))
	for i, b := range backends {
		src[i] = catalog.Source[*backend]{Server: b, Name: b.Name, Prefix: b.Prefix, Config: b.Config, Lists: b.Up.Lists()}
	}
	return catalog.Build(src, pol, log)
}

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
