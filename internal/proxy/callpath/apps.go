package callpath

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
)

// appsStage keeps MCP Apps' ui:// URIs as the catalog lists them
// (package catalog, apps.go): a resources/read of a listed ui:// URI
// reaches its server (the route step found it by the URI's server
// segment) with the server's own URI, and the ui:// URIs in what comes
// back — a read's contents, a tool result's resource_link and embedded
// resource blocks — carry the server's segment. It is in the pipeline
// while some server of the runtime's catalog serves apps (Run assembles
// the pipeline again when that changes), and costs a byte scan of each
// result with no "ui:" in it.
func appsStage(s *Router) Stage {
	return Stage{
		Name:    "apps",
		Methods: ToolCall | ResourceRead,
		Needed:  (*Runtime).hasApps,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if c.Method == "resources/read" {
					c.Params = ownURIParams(c.Params)
				}
				res, err := next(ctx, c)
				if err != nil || c.Backend == nil {
					return res, err
				}
				return catalog.AppResult(res, c.Backend.Name), nil
			}
		},
	}
}

// hasApps reports whether some server of rt's current catalog serves MCP
// Apps.
func (rt *Runtime) hasApps() bool {
	c := rt.Catalog.Load()
	return c != nil && c.Apps()
}

// ownURIParams is a resources/read's params with the URI its server knows.
func ownURIParams(params any) any {
	p, ok := params.(*mcp.ReadResourceParams)
	if !ok {
		return params
	}
	own := catalog.OwnURI(p.URI)
	if own == p.URI {
		return params
	}
	q := *p
	q.URI = own
	return &q
}

// appCall, after the route step looked c.Name up, takes the mux's own
// _meta["mux/uiResource"] out of the call (it is not forwarded) and, when
// the name is no visible one, resolves an app's call by its server's own
// tool name (catalog.ResolveRaw; that key picks among several servers),
// which from then on is a call of the visible name. A raw name several
// app servers have, with no origin naming one, is refused with their
// visible names.
func (c *Call) appCall() error {
	meta, origin := catalog.AppOrigin(c.Meta)
	c.Meta = meta
	if c.Route != nil || !c.View.Apps() {
		return nil
	}
	r, candidates := c.View.ResolveRaw(c.Name, origin)
	if r == nil {
		if len(candidates) > 0 {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q: several servers have a tool of that name (%s); call it by one of those names or set _meta[%q] to the app's ui:// URI",
				c.Name, strings.Join(candidates, ", "), catalog.OriginMetaKey)}
		}
		return nil
	}
	c.Route, c.Name = r, r.Name
	return nil
}
