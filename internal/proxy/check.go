package proxy

import (
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/interceptor"
)

// ConfigWarnings returns what Apply warns about a config beyond its own
// warnings (config.Config.Warnings), without applying it or connecting to
// anything, so that `mcp-mux validate` prints every warning `serve` would.
func ConfigWarnings(cfg *config.Config) []string {
	_, problems := interceptor.Build(cfg.Interceptors, interceptor.Options{})
	return interceptorWarnings(problems)
}

// interceptorWarnings are the warnings of the interceptors Build skipped.
func interceptorWarnings(problems []error) []string {
	var out []string
	for _, p := range problems {
		out = append(out, "skipping interceptor: "+p.Error())
	}
	return out
}
