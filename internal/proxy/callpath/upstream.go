package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// send is the end of the pipeline: it sends c.Upward to c.Backend on the
// caller's upstream session (package upstream), with what the upstream
// sends meanwhile going to c.Sink, and serves an upstream's
// input_required as the caller's era does (Era.Fulfil), each retry sent
// the same way.
func (s *Router) send(ctx context.Context, c *Call) (json.RawMessage, error) {
	ctx = WithSink(ctx, c.Sink)
	raw, err := c.request(ctx, c.Upward)
	if err == nil {
		raw, err = c.Era.Fulfil(ctx, c.Sink, c.Upward, raw, c.request)
	}
	return raw, err
}

// request sends params as c's request once, again after an upstream's 401
// when the credentials stage can renew the headers. A tools/call's
// duration and outcome go to its server's call metrics.
func (c *Call) request(ctx context.Context, params json.RawMessage) (raw json.RawMessage, err error) {
	b := c.Backend
	if c.Method == "tools/call" {
		start := time.Now()
		defer func() { b.Metrics.record(ctx, start, err) }()
	}
	for attempt := 0; ; attempt++ {
		if c.Method == "tools/call" {
			raw, err = b.Up.CallTool(ctx, c.Key, params, c.upHeader)
		} else {
			raw, err = b.Up.Request(ctx, c.Key, c.Method, params, c.upHeader)
		}
		var se *upstream.StatusError
		if attempt == 0 && c.renew != nil && errors.As(err, &se) && se.Code == http.StatusUnauthorized {
			if err := c.renew(ctx); err != nil {
				return nil, err
			}
			continue
		}
		return raw, err
	}
}
