package callpath

import (
	"context"
	"encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
)

// auditStage records each tools/call, prompts/get and resources/read
// (package audit): what was asked, where it went, why it was denied (the
// stages after it note that in c.Record), and how it ended — a refusal,
// an error, a cancelled call or one whose client left included. Without
// an audit trail configured it is left out.
func auditStage(s *Router) Stage {
	return Stage{
		Name:    "audit",
		Methods: ToolCall | PromptGet | ResourceRead,
		Needed:  func(*Runtime) bool { return s.audit != nil },
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				c.Record = s.audit.Start(auditKind(c.Method))
				switch c.Method {
				case "tools/call":
					c.Record.Tool, c.Record.BytesIn = c.Name, len(c.Args)
				case "prompts/get":
					c.Record.Prompt, c.Record.BytesIn = c.Name, promptArgsLen(c.Params)
				default:
					c.Record.URI, c.Record.BytesIn = c.Name, len(c.Name)
				}
				raw, err := next(ctx, c)
				s.audit.Finish(ctx, &c.Record, audit.Caller{User: c.Session.User, Thread: c.Key.Thread, Session: c.Session.ID, Protocol: c.Era.Version(),
					Anonymous: s.anonymous(c)}, raw, err)
				return raw, err
			}
		},
	}
}

// anonymous reports whether no authentication identified c's caller: the
// runtime the call ran on (else the current one) takes every caller for
// the default user (inbound.auth mode none).
func (s *Router) anonymous(c *Call) bool {
	rt := c.Runtime
	if rt == nil && s.rt != nil {
		rt = s.rt.Load()
	}
	return rt != nil && rt.Auth != nil && rt.Auth.Mode() == inbound.ModeNone
}

// auditKind is the record kind of method.
func auditKind(method string) string {
	switch method {
	case "tools/call":
		return audit.ToolCall
	case "prompts/get":
		return audit.PromptGet
	}
	return audit.ResourceRead
}

// noteRoute records in c's record the server and raw name the call goes
// to (none for mcp-mux's own tools).
func (c *Call) noteRoute() {
	if c.Backend == nil {
		return
	}
	c.Record.Server = c.Backend.Name
	if c.Method == "tools/call" {
		c.Record.RawTool = c.Raw
	}
}
