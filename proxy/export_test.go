package proxy

import (
	"slices"

	"github.com/mcp-mux/mcp-mux/interceptor"
)

// AddInterceptorForTest appends ic to the running runtime's interceptors,
// as a config's mcpInterceptors would place a compiled-in one last. The
// runtime is published again, so calls that start later see it.
func AddInterceptorForTest(s *Server, ic interceptor.Interceptor) {
	rt := s.rt.Load()
	rt.icepts = append(slices.Clip(rt.icepts), ic)
	s.rt.Store(rt)
}
