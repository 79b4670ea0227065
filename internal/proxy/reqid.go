package proxy

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
)

// Request ids: every /mcp request gets one (internal/reqid: reqid.Tag in
// Handler, reqid.WithHeader in receive), so that every log line of the
// call — here, in upstream and in the interceptors — names it as
// request_id.

// logFor is the logger for a line about the request ctx belongs to.
func (s *Server) logFor(ctx context.Context) hclog.Logger { return reqid.Logger(ctx, s.log) }
