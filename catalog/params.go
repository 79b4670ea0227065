package catalog

import (
	"sync"

	"github.com/mcp-mux/mcp-mux/upstream"
)

// paramSpec is a route's x-mcp-header bindings, read from its listed tool
// on the first call that asks for them.
type paramSpec struct {
	once sync.Once
	ph   upstream.ParamHeaders
}

// ParamHeaders returns the tool's x-mcp-header bindings (2026-07-28
// Mcp-Param-* headers), read from its tool object once.
func (r *Route[S]) ParamHeaders() upstream.ParamHeaders {
	r.params.once.Do(func() { r.params.ph = upstream.ToolParamHeaders(r.JSON) })
	return r.params.ph
}
