package interceptor

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
)

// newCallLog builds the call log, registered under the config name
// "audit" (mcpInterceptors: ["audit"]): one structured line per call, who
// (as the audit records show the caller: Options.User), which tool where,
// how long and how it ended, never arguments or results. Its logger keeps
// the name "audit", so log lines read as before.
func newCallLog(opts Options) Interceptor {
	log := opts.Logger.Named("audit")
	return func(ctx context.Context, c *Call, next Next) (json.RawMessage, error) {
		start := time.Now()
		res, err := next(ctx)
		kv := make([]any, 0, 12)
		if opts.User != nil {
			if u := opts.User(c.User); u != "" {
				kv = append(kv, "user", u)
			}
		}
		kv = append(kv, "thread", c.Thread, "server", c.Server, "tool", c.Tool,
			"duration_ms", float64(time.Since(start).Microseconds())/1000, "outcome", string(OutcomeOf(res, err)))
		reqid.Logger(ctx, log).Info("tool call", kv...)
		return res, err
	}
}
