package callpath

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Subscribe subscribes st to (on) or unsubscribes it from a resource URI
// of b; the upstream holds one subscription per URI while any session
// does (package subscriptions).
func (s *Router) Subscribe(ctx context.Context, st *Session, b *Backend, uri string, on bool) error {
	if on {
		// Admitted like a call: bounded per session, and cancelled when the
		// session ends, so a DELETE never waits for a slow server.
		ctx, done, err := s.Admit(ctx, st)
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return &wire.Error{Code: rpcErr.Code, Message: rpcErr.Message}
			}
			return err
		}
		defer done()
		return s.subs.Subscribe(ctx, &st.Subs, b.Name, b.Up, uri)
	}
	if err := s.subs.Unsubscribe(ctx, &st.Subs, uri); err != nil {
		s.logFor(ctx).Debug("upstream unsubscribe failed", "server", b.Name, "err", err)
	}
	return nil
}

// DropSubscriptions releases a closed session's subscriptions.
func (s *Router) DropSubscriptions(st *Session) {
	ctx, cancel := context.WithTimeout(context.Background(), NotifyTimeout)
	defer cancel()
	if err := s.subs.UnsubscribeAll(ctx, &st.Subs); err != nil {
		s.log.Debug("upstream unsubscribe failed", "err", err)
	}
}
