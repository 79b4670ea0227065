package catalog

import (
	"sync"

	"github.com/mcp-mux/mcp-mux/internal/upstream/paramheader"
)

// paramSpec is a route's x-mcp-header bindings, read from its listed tool
// on the first call that asks for them.
type paramSpec struct {
	once sync.Once
	ph   paramheader.Headers
}

// ParamHeaders returns the tool's x-mcp-header bindings (2026-07-28
// Mcp-Param-* headers), read from its tool object once.
func (r *Route[S]) ParamHeaders() paramheader.Headers {
	r.params.once.Do(func() { r.params.ph = paramheader.ForTool(r.JSON) })
	return r.params.ph
}
