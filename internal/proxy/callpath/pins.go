package callpath

// The pins stage: a tools/call of a tool whose server pins its tool
// definitions in block mode (pin_tools) is refused while the server lists
// a definition that differs from the pinned one and no operator accepted
// it (package toolpin) — the caller's list still shows the pinned
// definition, and nothing is sent to the server.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// pinsStage refuses the calls of changed tools of block-mode servers.
// Left out when no server pins in block mode.
func pinsStage(_ *Router) Stage {
	return Stage{
		Name:    "pins",
		Methods: ToolCall,
		Needed:  blocksPins,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				b := c.Backend
				if b == nil || b.Pins == nil || b.Config == nil || b.Config.PinTools != config.PinBlock {
					return next(ctx, c)
				}
				why := b.Pins.Refused(ctx, b.Name, c.Raw)
				if why == "" {
					return next(ctx, c)
				}
				c.Record.Deny("pin_tools: definition changed")
				return wire.ToolError(fmt.Sprintf("Tool %q of MCP server %q is refused: %s. An operator must accept the new definition (POST /api/pins/%s/%s) before it runs. Nothing was sent to the server.",
					c.Name, b.Name, why, url.PathEscape(b.Name), url.PathEscape(c.Raw))), nil
			}
		},
	}
}

// blocksPins reports whether a server of rt pins its tools in block mode.
func blocksPins(rt *Runtime) bool {
	for _, b := range rt.Backends {
		if b.Pins != nil && b.Config != nil && b.Config.PinTools == config.PinBlock {
			return true
		}
	}
	return false
}

// lists is b's upstream's last discovery as the catalog takes it: its
// tools checked against their pins (toolpin.Guard.Check) when b has a
// Guard.
func (b *Backend) lists() upstream.Lists {
	l := b.Up.Lists()
	if b.Pins == nil {
		return l
	}
	mode := config.PinOff
	if b.Config != nil {
		mode = b.Config.PinTools
	}
	in := make([]toolpin.Tool, len(l.Tools))
	for i, t := range l.Tools {
		in[i] = toolpin.Tool{Name: t.Name, Raw: t.Raw}
	}
	out := b.Pins.Check(b.Name, mode, in)
	l.Tools = make([]upstream.Tool, len(out))
	for i, t := range out {
		l.Tools[i] = upstream.Tool{Name: t.Name, Raw: t.Raw}
	}
	return l
}
