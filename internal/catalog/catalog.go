// Package catalog aggregates what the upstream servers discovered into the
// one tool, prompt and resource catalog mcp-mux serves: visible names and
// prefixes, first-wins collisions, guardrails, routing hints, advertised
// capabilities, durable-task tool roles, and tool_search's index, matcher
// and per-session promotions.
//
// Build takes a plain view of each discovered backend (a Source) and
// returns an immutable Catalog; a change upstream or in the config builds a
// new one. Lookups lead back to the caller's own handle for a backend (the
// type parameter S), so the catalog needs nothing of how servers are
// reached. Nothing here does I/O.
package catalog

import (
	"encoding/json"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Source is the plain view of one discovered backend that a catalog is
// built from.
type Source[S any] struct {
	// Server is the caller's handle for the backend; lookups return it.
	Server S
	// Name is the server's configured name.
	Name string
	// Prefix names its tools and prompts Name + "_" + the raw name.
	Prefix bool
	// Config is the server's settings (routing, tool overrides,
	// description, task toolsets); nil when there are none.
	Config *config.Server
	// Lists is what the server's last discovery found.
	Lists upstream.Lists
	// Accounts: each caller connects their own account on the server;
	// the built-in connect_account is listed, naming it.
	Accounts bool
}

// Options is what a catalog takes from the config besides each source's
// own settings.
type Options struct {
	Guardrails config.Guardrails
	ToolSearch config.ToolSearch
	// Profiles are the named views each catalog carries (profiles.go).
	Profiles map[string]*config.Profile
	// Tasks is whether durable tasks are on: submit tools are wrapped and
	// the built-in task tools listed.
	Tasks bool
}

// Policy is Options compiled once per config, shared by every catalog
// built under it.
type Policy struct {
	guard  *guard
	search bool
	topK   int
	tasks  bool
	// always are tool_search.always_listed's globs.
	always []string
	// profiles are the compiled profiles; nil when there are none.
	profiles map[string]*profileFilter
}

// NewPolicy compiles o.
func NewPolicy(o Options) *Policy {
	return &Policy{guard: newGuard(o.Guardrails), search: o.ToolSearch.Enabled, topK: o.ToolSearch.AutoPromoteTopK, tasks: o.Tasks,
		always: o.ToolSearch.AlwaysListed, profiles: newProfiles(o.Profiles)}
}

// Route is one visible tool and where calls to it go.
type Route[S any] struct {
	Name   string // visible name (the override's name, prefixed)
	Raw    string // the upstream's tool name, which calls reach
	Server S      // the owning backend; the zero S for a built-in tool
	// JSON is the upstream's tool object with the visible name and mux
	// _meta, as listed.
	JSON json.RawMessage
	// Deny, when set, is the guardrail's tool error result: the tool is not
	// listed and calls to it are answered with this, never forwarded.
	Deny json.RawMessage
	// Task is the durable-task toolset of a submit tool, or nil.
	Task *taskpoll.Toolset
	// Builtin marks a built-in tool (a task tool, connect_account), which
	// has no server.
	Builtin bool

	source  string         // the owning server's name, for logs
	routing config.Routing // effective routing (server routing + tool override)
	idx     int            // position in Catalog.order
	params  paramSpec      // x-mcp-header bindings of JSON, read on demand
	annots  annotSpec      // the annotations of JSON, read on demand
	// fixed are the arguments the tool's override sets in every call
	// (Arguments, overrides.go); nil for none.
	fixed *fixedArgs
}

// Memo is a result a server derives from a catalog's tools/list (such as
// its 2026-07-28 wrapping), cached with the catalog. Key is what it was
// derived under; a different key means derive again.
type Memo struct {
	Key string
	Raw json.RawMessage
}

// Catalog is the aggregated catalog of one set of sources. It is immutable
// once built, apart from the Memo slot.
type Catalog[S any] struct {
	routes   map[string]*Route[S] // every named tool, denied ones included
	order    []*Route[S]          // the listed (allowed) tools
	fullJSON json.RawMessage      // {"tools": order}
	listJSON json.RawMessage      // tools/list of a session that promoted nothing
	// instructions is the initialize result's instructions: routing hints
	// and, with tool_search, the deferred tool names.
	instructions string
	search       *searchIndex // nil unless tool_search is on and tools are listed
	res          resourceIndex[S]
	apps         appIndex[S] // MCP Apps: servers by name, app servers' own tool names (apps.go)
	skills       *Skills[S]  // the skills extension's servers (skills.go)
	caps         mcp.ServerCapabilities
	memo         atomic.Pointer[Memo]
	// dups are the names and URIs a later server lost to an earlier one,
	// in build order; conflicts the listed tools whose overridden
	// annotations contradict each other (conflicts.go). Both are logged by
	// LogWarnings; a profile's view has no conflicts of its own.
	dups      []duplicate
	conflicts []conflict
	// views are the profiles' catalogs by name (profiles.go); nil in a
	// view and without profiles.
	views map[string]*Catalog[S]
}

// Build applies naming, the charset rule and first-wins collisions to the
// sources' tool lists, in source order then each server's list order, then
// the guardrails, routing metadata and tool_search; prompts and resources
// are aggregated alongside. Each profile of pol gets its view (For).
func Build[S any](sources []Source[S], pol *Policy, log hclog.Logger) *Catalog[S] {
	c := build(sources, pol, nil, log)
	c.buildViews(sources, pol)
	return c
}

// build is Build of one catalog: the full one (f nil) or a profile's view.
func build[S any](sources []Source[S], pol *Policy, f *profileFilter, log hclog.Logger) *Catalog[S] {
	c := &Catalog[S]{routes: make(map[string]*Route[S])}
	builtins := c.reserveBuiltins(pol, sources)
	for i := range sources {
		c.addTools(&sources[i], pol, f, log)
	}
	for _, r := range builtins {
		if !f.allows(r.Name) {
			delete(c.routes, r.Name)
			continue
		}
		if c.guarded(r, pol, log) {
			c.list(r)
		}
	}
	c.fullJSON = encodeTools(c.order, nil)
	c.listJSON = c.fullJSON
	if pol.search && len(c.order) > 0 {
		c.search = buildSearch(c.order, pol.topK, f.alwaysListed(pol))
		c.listJSON = c.search.list
	}
	c.instructions = instructions(c.order, c.search)
	c.skills = buildSkills(sources, pol, log)
	c.res = buildResources(sources, c.skills, log)
	c.skills.res = &c.res
	c.apps = buildApps(sources, c.routes) // apps.go
	c.dups = append(c.dups, c.res.dups...)
	c.caps = capabilities(sources, pol)
	advertiseSkills(&c.caps, c.skills)
	if pol.tasks {
		c.res.tmplList = append(c.res.tmplList, taskTemplate)
	}
	return c
}

// guarded applies the guardrails to a named route: a denied route gets its
// error result in Deny. It reports whether the route is allowed.
func (c *Catalog[S]) guarded(r *Route[S], pol *Policy, log hclog.Logger) bool {
	r.Deny = pol.guard.check(r.Name, log)
	return r.Deny == nil
}

// list appends an allowed route to the listed tools.
func (c *Catalog[S]) list(r *Route[S]) {
	r.idx = len(c.order)
	c.order = append(c.order, r)
}

// Lookup returns the route of a visible tool name, denied tools included,
// or nil.
func (c *Catalog[S]) Lookup(name string) *Route[S] { return c.routes[name] }

// Len is the number of listed tools.
func (c *Catalog[S]) Len() int { return len(c.order) }

// ToolCount is how many tools of one server a catalog lists and how many
// it names but the guardrails hide.
type ToolCount struct{ Listed, Hidden int }

// ToolCounts counts the catalog's tools by server name, the built-in task
// tools under "". The Listed counts add up to Len; a tool dropped by naming
// or a collision is in neither count.
func (c *Catalog[S]) ToolCounts() map[string]ToolCount {
	out := make(map[string]ToolCount)
	for _, r := range c.routes {
		tc := out[r.source]
		if r.Deny != nil {
			tc.Hidden++
		} else {
			tc.Listed++
		}
		out[r.source] = tc
	}
	return out
}

// ListJSON is the tools/list result of a session that promoted nothing:
// every listed tool, or with tool_search only tool_search.
func (c *Catalog[S]) ListJSON() json.RawMessage { return c.listJSON }

// Searching reports whether tool_search defers this catalog's tools.
func (c *Catalog[S]) Searching() bool { return c.search != nil }

// Instructions is the initialize result's instructions, or "".
func (c *Catalog[S]) Instructions() string { return c.instructions }

// Capabilities is what initialize and server/discover advertise. It is a
// copy; its pointers are never written.
func (c *Catalog[S]) Capabilities() mcp.ServerCapabilities { return c.caps }

// Memo returns the cached derived tools/list, or nil.
func (c *Catalog[S]) Memo() *Memo { return c.memo.Load() }

// SetMemo caches a derived tools/list.
func (c *Catalog[S]) SetMemo(m *Memo) { c.memo.Store(m) }

// encodeTools encodes a tools/list result: the routes' tool objects, then
// extra when given.
func encodeTools[S any](routes []*Route[S], extra json.RawMessage) json.RawMessage {
	n := 16 + len(extra)
	for _, r := range routes {
		n += len(r.JSON) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"tools":[`...)
	for i, r := range routes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.JSON...)
	}
	if extra != nil {
		if len(routes) > 0 {
			b = append(b, ',')
		}
		b = append(b, extra...)
	}
	return append(b, "]}"...)
}

// SameTools reports whether two catalogs list the same tools: every listed
// tool, and what a session that promoted nothing sees.
func SameTools[S any](a, b *Catalog[S]) bool {
	if a == nil || b == nil {
		return a == b
	}
	return string(a.fullJSON) == string(b.fullJSON) && string(a.listJSON) == string(b.listJSON) && sameViews(a, b, SameTools[S])
}

// SamePrompts reports whether two catalogs list the same prompts.
func SamePrompts[S any](a, b *Catalog[S]) bool {
	return sameRaw(a.res.promptList, b.res.promptList) && sameViews(a, b, SamePrompts[S])
}

// SameResources reports whether two catalogs list the same resources and
// resource templates.
func SameResources[S any](a, b *Catalog[S]) bool {
	return sameRaw(a.res.resList, b.res.resList) && sameRaw(a.res.tmplList, b.res.tmplList) && sameViews(a, b, SameResources[S])
}

// sameRaw reports whether two lists hold the same bytes.
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
