package proxy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/taskpoll"
)

// toolNameRE is DeerFlow's tool-name charset plus the 128-character limit
// that model providers and the MCP spec put on function names.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// route is one visible tool and where calls to it go.
type route struct {
	name    string // visible name
	raw     string // upstream tool name
	server  *backend
	json    json.RawMessage // the upstream's tool object with the visible name and mux _meta
	routing config.Routing  // effective routing (server routing + tool override)
	idx     int             // position in catalog.order
	// deny, when set, is the guardrail's tool error result: the tool is not
	// listed and calls to it are answered with this, never forwarded.
	deny json.RawMessage
	// task marks a task submit tool; builtin a built-in task tool, which
	// has no server (tasks.go).
	task    *taskpoll.Toolset
	builtin bool
	params  paramSpec // x-mcp-header bindings of json (modern_headers.go)
}

// catalog is the aggregated tool list of one runtime. It is immutable once
// built; a change upstream or in the config builds a new one.
type catalog struct {
	routes   map[string]*route // every named tool, denied ones included
	order    []*route          // the listed (allowed) tools
	fullJSON json.RawMessage   // {"tools": order}
	listJSON json.RawMessage   // cached tools/list result when tool_search is off
	// instructions is the initialize result's instructions: routing hints
	// and, with tool_search, the deferred tool names.
	instructions string
	search       *searchIndex // nil unless tool_search is on and tools are listed
	res          resourceIndex
	caps         mcp.ServerCapabilities // what initialize and discover advertise (capabilities.go)
	// modernList is listJSON as a 2026-07-28 result (fastpath_modern.go).
	modernList atomic.Pointer[modernListCache]
}

// catalogPolicy is what a catalog takes from the config besides each
// backend's own *config.Server: guardrails and tool_search.
type catalogPolicy struct {
	guard  *guard
	search bool
	topK   int
	tasks  bool // durable tasks on: submit tools wrapped, built-ins listed
}

func newCatalogPolicy(cfg *config.Config, tasks bool) *catalogPolicy {
	return &catalogPolicy{guard: newGuard(cfg.Guardrails), search: cfg.ToolSearch.Enabled, topK: cfg.ToolSearch.AutoPromoteTopK, tasks: tasks}
}

// buildCatalog applies naming, the charset rule and first-wins collisions to
// the backends' tool lists, in config order then each server's list order,
// then the guardrails, routing metadata and tool_search.
func buildCatalog(backends []*backend, pol *catalogPolicy, log hclog.Logger) *catalog {
	c := &catalog{routes: make(map[string]*route)}
	builtins := builtinRoutes(c, pol)
	for _, b := range backends {
		submit, hidden := taskRoles(b.srv, pol.tasks)
		for _, t := range b.up.Tools() {
			if hidden[t.Name] {
				continue // a task tool only the poller calls
			}
			name := t.Name
			if b.prefix {
				name = b.name + "_" + t.Name
			}
			if !toolNameRE.MatchString(name) {
				log.Warn("dropping tool with an invalid name: names must match ^[A-Za-z0-9_-]{1,128}$",
					"server", b.name, "tool", fmt.Sprintf("%.200q", name))
				continue
			}
			if pol.search && name == toolSearchName {
				log.Warn("dropping tool named like mcp-mux's tool_search while tool_search is enabled", "server", b.name, "tool", name)
				continue
			}
			if prev, dup := c.routes[name]; dup {
				if prev.builtin {
					log.Warn("dropping tool named like an mcp-mux built-in task tool", "server", b.name, "tool", name)
					continue
				}
				log.Warn("duplicate tool name; keeping the first", "tool", name,
					"kept_server", prev.server.name, "skipped_server", b.name)
				continue
			}
			r := &route{name: name, raw: t.Name, server: b, task: submit[t.Name]}
			c.routes[name] = r
			if r.deny = pol.guard.check(name, log); r.deny != nil {
				continue
			}
			if b.srv != nil {
				r.routing = b.srv.ToolRouting(t.Name)
			}
			r.json = toolJSON(t, name, toolMeta(b.srv, r.routing))
			if r.task != nil {
				r.json = withContract(r.json, r.task.Name)
			}
			r.idx = len(c.order)
			c.order = append(c.order, r)
		}
	}
	for _, r := range builtins {
		if r.deny = pol.guard.check(r.name, log); r.deny == nil {
			r.idx = len(c.order)
			c.order = append(c.order, r)
		}
	}
	c.fullJSON = encodeTools(c.order, nil)
	c.listJSON = c.fullJSON
	if pol.search && len(c.order) > 0 {
		c.search = buildSearch(c.order, c.routes, pol.topK)
		c.listJSON = c.search.list
	}
	c.instructions = instructions(c.order, c.search != nil)
	c.res = buildResources(backends, log)
	c.caps = catalogCapabilities(backends, pol)
	if pol.tasks {
		c.res.tmplList = append(c.res.tmplList, taskTemplate)
	}
	return c
}

// encodeTools encodes a tools/list result: the routes' tool objects, then
// extra when given.
func encodeTools(routes []*route, extra json.RawMessage) json.RawMessage {
	n := 16 + len(extra)
	for _, r := range routes {
		n += len(r.json) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"tools":[`...)
	for i, r := range routes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.json...)
	}
	if extra != nil {
		if len(routes) > 0 {
			b = append(b, ',')
		}
		b = append(b, extra...)
	}
	return append(b, "]}"...)
}

// sameTools reports whether two catalogs list the same tools: every listed
// tool, and what a session that promoted nothing sees.
func sameTools(a, b *catalog) bool {
	if a == nil || b == nil {
		return a == b
	}
	return string(a.fullJSON) == string(b.fullJSON) && string(a.listJSON) == string(b.listJSON)
}

func sameRaw(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

// samePrompts and sameResources compare the other aggregated lists.
func samePrompts(a, b *catalog) bool { return sameRaw(a.res.promptList, b.res.promptList) }

func sameResources(a, b *catalog) bool {
	return sameRaw(a.res.resList, b.res.resList) && sameRaw(a.res.tmplList, b.res.tmplList)
}
