package callpath

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// argumentsStage builds the params sent upstream (c.Upward): for a
// tools/call the server's own tool name, the override's fixed arguments
// over the caller's (catalog/overrides.go; the stages before it saw what
// the caller sent), and its _meta with the protocol's own keys dropped and
// a progress token replaced by one routed back to the caller's sink; for
// a prompts/get the prompt's own name; for everything the answers the
// caller's era carries for an earlier input_required (Era.Retry), and the
// call's return path to its Sink (c.back, sink.go).
func argumentsStage(s *Router) Stage {
	return Stage{
		Name:    "arguments",
		Methods: AllMethods,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if c.Method != "tools/call" {
					params, err := c.forwardParams()
					if err != nil {
						return nil, err
					}
					c.Upward = c.Era.Retry(stripProtocolMeta(params))
					c.back = returnPath{sink: c.Sink, panics: s.panics}
					return next(ctx, c)
				}
				r := c.Route
				args, err := r.Arguments(c.Args)
				if err != nil {
					return nil, refusal{&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("tool %q: %v", c.Name, err)}}
				}
				c.Applied = args
				fwd, progress := forwardMeta(c.Meta)
				c.back = returnPath{sink: c.Sink, panics: s.panics, progress: progress}
				c.Upward = c.Era.Retry(wire.AppendCallParams(make([]byte, 0, len(args)+len(r.Raw)+len(fwd)+64), r.Raw, args, fwd))
				return next(ctx, c)
			}
		},
	}
}

// forwardParams is the params of a request other than tools/call as its
// server gets them: a prompt under its own name.
func (c *Call) forwardParams() (json.RawMessage, error) {
	params := c.Params
	if p, ok := params.(*mcp.GetPromptParams); ok {
		q := *p
		q.Name = c.Raw
		params = &q
	}
	if raw, ok := params.(json.RawMessage); ok {
		return raw, nil
	}
	return json.Marshal(params)
}

// forwardMeta prepares a call's _meta for the upstream: the protocol's own
// io.modelcontextprotocol/* keys are dropped, and a progress token is
// replaced by a fresh one whose progress goes back to the caller's (the
// route returned; zero for none).
func forwardMeta(meta json.RawMessage) (json.RawMessage, progressRoute) {
	if len(meta) == 0 || string(meta) == "{}" || string(meta) == "null" ||
		wire.KeysHavePrefix(meta, "io.modelcontextprotocol/") { // a 2026-07-28 request's own, only
		return nil, progressRoute{}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil || len(m) == 0 {
		return nil, progressRoute{}
	}
	var progress progressRoute
	for key, v := range m {
		switch {
		case key == "progressToken":
			progress = newProgressRoute(v)
			m[key], _ = json.Marshal(progress.upstream)
		case strings.HasPrefix(key, "io.modelcontextprotocol/"):
			delete(m, key)
		}
	}
	if len(m) == 0 {
		return nil, progress
	}
	b, _ := json.Marshal(m)
	return b, progress
}

// stripProtocolMeta drops the protocol's own io.modelcontextprotocol/* keys
// from params._meta: they describe the downstream request (a 2026-07-28
// client's version and capabilities), not the one mcp-mux sends upstream.
func stripProtocolMeta(params json.RawMessage) json.RawMessage {
	const prefix = "io.modelcontextprotocol/"
	return wire.DropMeta(params, `"`+prefix, func(k string) bool { return strings.HasPrefix(k, prefix) })
}
