package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/upstream"
)

const (
	defaultUser   = "default"
	notifyTimeout = 10 * time.Second
)

// rawResult sends bytes to the client exactly as an upstream produced them.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) MarshalJSON() ([]byte, error) { return r.raw, nil }

// receive is the receiving middleware: mcp-mux answers tools/* itself and
// leaves the rest of the protocol to the SDK.
func (s *Server) receive(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		switch method {
		case "initialize":
			res, err := next(ctx, method, req)
			if err == nil {
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
					s.openSession(ss)
				}
			}
			return res, err
		case "tools/list":
			return &rawResult{raw: s.rt.Load().cat.Load().listJSON}, nil
		case "tools/call":
			r := req.(*mcp.CallToolRequest)
			ss := r.Session
			var meta json.RawMessage
			if m := r.Params.Meta; len(m) > 0 {
				meta, _ = json.Marshal(m)
			}
			var extra *requestExtra
			if r.Extra != nil {
				extra = &requestExtra{header: r.Extra.Header}
			}
			if st := s.sessions.get(ss); st != nil {
				st.touch()
			}
			raw, err := s.callTool(ctx, s.callerKey(ss, extra), r.Params.Name, r.Params.Arguments, meta)
			if err != nil {
				return nil, err
			}
			return &rawResult{raw: raw}, nil
		}
		return next(ctx, method, req)
	}
}

// callerKey is the (user, thread) an upstream session is scoped by.
func (s *Server) callerKey(ss *mcp.ServerSession, extra *requestExtra) upstream.Key {
	k := upstream.Key{User: defaultUser}
	if extra != nil && extra.header != nil {
		if h := s.rt.Load().cfg.Inbound.ThreadHeader; h != "" {
			k.Thread = extra.header.Get(h)
		}
	}
	if k.Thread == "" && ss != nil {
		k.Thread = ss.ID()
	}
	return k
}

// requestExtra is what mcp-mux reads from the HTTP request that carried a message.
type requestExtra struct {
	header http.Header
}

// errUnknownTool is the JSON-RPC error for a name not in the catalog.
func errUnknownTool(name string) *jsonrpc.Error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", name)}
}

// callTool routes one tools/call and returns the raw CallToolResult. Only a
// protocol-level failure (unknown tool, an upstream JSON-RPC error) is an
// error; an upstream that fails to answer is a tool error result naming it.
func (s *Server) callTool(ctx context.Context, key upstream.Key, name string, args, meta json.RawMessage) (json.RawMessage, error) {
	s.inflight.Add(1)
	defer s.inflight.Done()
	rt := s.rt.Load()
	r := rt.cat.Load().routes[name]
	if r == nil {
		return nil, errUnknownTool(name)
	}
	params := wire.AppendCallParams(make([]byte, 0, len(args)+len(r.raw)+64), r.raw, args, forwardMeta(meta))
	raw, err := r.server.up.CallTool(ctx, key, params, nil)
	if err == nil {
		return raw, nil
	}
	var rpcErr *wire.Error
	if errors.As(err, &rpcErr) {
		return nil, &jsonrpc.Error{Code: rpcErr.Code, Message: rpcErr.Message, Data: rpcErr.Data}
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	s.log.Warn("tool call failed", "server", r.server.name, "tool", r.raw, "err", err)
	return wire.ToolError(fmt.Sprintf("Error: MCP server %q failed to run tool %q: %v", r.server.name, r.raw, err)), nil
}

// forwardMeta drops the keys mcp-mux must not forward upstream: the
// protocol's own io.modelcontextprotocol/* keys and the caller's progress
// token, which is only meaningful on the downstream session.
func forwardMeta(meta json.RawMessage) json.RawMessage {
	if len(meta) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil || len(m) == 0 {
		return nil
	}
	changed := false
	for k := range m {
		if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") {
			delete(m, k)
			changed = true
		}
	}
	if !changed {
		return meta
	}
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m)
	return b
}
