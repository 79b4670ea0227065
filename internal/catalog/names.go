package catalog

import (
	"fmt"
	"regexp"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Visible names: a prefixed server's tools and prompts are named
// server_raw, others keep the raw name. A name must match toolNameRE, and
// the first source (in config order, then the server's list order) to use
// a name keeps it; later ones are dropped with a warning. The built-in task
// tools and, with tool_search on, tool_search itself are reserved.

// toolNameRE is DeerFlow's tool-name charset plus the 128-character limit
// that model providers and the MCP spec put on function names.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// visibleName is a raw tool or prompt name as the catalog lists it.
func visibleName[S any](src *Source[S], raw string) string {
	if src.Prefix {
		return src.Name + "_" + raw
	}
	return raw
}

// addTools names, admits and lists one source's tools.
// f, when set, is the profile whose view c is: only the tools it allows
// are named, with its routing overrides.
func (c *Catalog[S]) addTools(src *Source[S], pol *Policy, f *profileFilter, log hclog.Logger) {
	roles := taskRolesOf(src.Config, pol.tasks)
	for _, t := range src.Lists.Tools {
		if roles.hidden[t.Name] {
			continue // a task tool only the poller calls
		}
		name := visibleName(src, exposedName(src.Config, t.Name)) // overrides.go
		if !c.nameFree(src.Name, name, pol, log) || !f.allows(name) {
			continue
		}
		r := &Route[S]{Name: name, Raw: t.Name, Server: src.Server, Task: roles.submit[t.Name], source: src.Name}
		c.routes[name] = r
		if c.guarded(r, pol, log) {
			r.describe(src.Config, t, f.routingOf(src.Name))
			c.list(r)
			if f == nil {
				c.noteConflict(src.Name, t, presentationOf(src.Config, t.Name).Annotations) // conflicts.go
			}
		}
	}
}

// nameFree reports whether server's tool may take the visible name: it has
// the tool-name charset, is not reserved, and no earlier tool took it. A
// tool that may not is logged.
func (c *Catalog[S]) nameFree(server, name string, pol *Policy, log hclog.Logger) bool {
	if !toolNameRE.MatchString(name) {
		log.Warn("dropping tool with an invalid name: names must match ^[A-Za-z0-9_-]{1,128}$",
			"server", server, "tool", fmt.Sprintf("%.200q", name))
		return false
	}
	if pol.search && name == ToolSearchName {
		log.Warn("dropping tool named like mcp-mux's tool_search while tool_search is enabled", "server", server, "tool", name)
		return false
	}
	prev, dup := c.routes[name]
	switch {
	case !dup:
		return true
	case prev.Builtin:
		log.Warn("dropping tool named like an mcp-mux built-in task tool", "server", server, "tool", name)
	default:
		c.dups = append(c.dups, duplicate{what: "tool name", field: "tool", key: name, kept: prev.source, skipped: server})
	}
	return false
}

// describe sets a listed route's effective routing, fixed arguments and
// its tool object: the upstream's, renamed, with mux _meta and the tool's
// override (overrides.go), and for a submit tool the durable task contract.
// ov is a profile's override of the server's routing.
func (r *Route[S]) describe(sc *config.Server, t upstream.Tool, ov *config.RoutingOverride) {
	if sc != nil {
		r.routing = sc.ToolRouting(t.Name)
	}
	if ov != nil {
		r.routing = ov.Apply(r.routing)
	}
	p := presentationOf(sc, t.Name)
	r.fixed = newFixedArgs(p.FixedArguments)
	r.JSON = overridden(toolJSON(t, r.Name, toolMeta(sc, r.routing)), p)
	r.JSON = appTool(r.JSON, r.source) // appuris.go: its UI link as listed
	if r.Task != nil {
		r.JSON = withContract(r.JSON, r.Task.Name)
	}
}
