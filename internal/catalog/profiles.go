package catalog

import (
	"path"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// Profiles: named views of the catalog (config "profiles").
//
// A catalog built under a policy with profiles carries one view per
// profile, built with it from the same sources: only the profile's
// servers (their tools, prompts, resources and capabilities), only the
// visible tool names its include_tools globs match and its exclude_tools
// globs do not, with its routing overrides. A view is a whole Catalog,
// immutable and cached like the full one (its serialized tools/list,
// tool_search index, instructions, Memo), and the guardrails apply in it
// as in the full catalog. A tool a view leaves out has no route in it:
// calling it is the same "unknown tool" as a name no server has.

// profileFilter is one profile compiled for catalog builds.
type profileFilter struct {
	servers          map[string]bool // nil: every server
	include, exclude []string
	routing          map[string]*config.RoutingOverride
	always           []string // always_listed globs; nil: the policy's
}

// newProfiles compiles the profiles block; nil when there are none.
func newProfiles(ps map[string]*config.Profile) map[string]*profileFilter {
	if len(ps) == 0 {
		return nil
	}
	out := make(map[string]*profileFilter, len(ps))
	for name, p := range ps {
		f := &profileFilter{include: p.IncludeTools, exclude: p.ExcludeTools, routing: p.Routing, always: p.AlwaysListed}
		if p.Servers != nil {
			f.servers = make(map[string]bool, len(p.Servers))
			for _, s := range p.Servers {
				f.servers[s] = true
			}
		}
		out[name] = f
	}
	return out
}

// allows reports whether the profile serves the visible tool name; a nil
// filter (the full catalog) serves every tool.
func (f *profileFilter) allows(name string) bool {
	if f == nil {
		return true
	}
	if f.include != nil && !matchAny(f.include, name) {
		return false
	}
	return !matchAny(f.exclude, name)
}

// matchAny reports whether any glob matches name (globs were validated by
// config; a bad one matches nothing).
func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// alwaysListed returns the always_listed globs of the view f builds: the
// profile's own when it has them, else the policy's.
func (f *profileFilter) alwaysListed(pol *Policy) []string {
	if f != nil && f.always != nil {
		return f.always
	}
	return pol.always
}

// routingOf returns the profile's routing override of a server, or nil.
func (f *profileFilter) routingOf(server string) *config.RoutingOverride {
	if f == nil {
		return nil
	}
	return f.routing[server]
}

// profileSources returns the sources of f's servers.
func profileSources[S any](f *profileFilter, all []Source[S]) []Source[S] {
	if f.servers == nil {
		return all
	}
	out := make([]Source[S], 0, len(f.servers))
	for _, src := range all {
		if f.servers[src.Name] {
			out = append(out, src)
		}
	}
	return out
}

// buildViews builds c's view of each profile of pol. Their problems
// (invalid names, collisions) are the full catalog's, logged once there.
func (c *Catalog[S]) buildViews(sources []Source[S], pol *Policy) {
	if len(pol.profiles) == 0 {
		return
	}
	quiet := hclog.NewNullLogger()
	c.views = make(map[string]*Catalog[S], len(pol.profiles))
	for name, f := range pol.profiles {
		c.views[name] = build(profileSources(f, sources), pol, f, quiet)
	}
}

// For returns the catalog a caller of profile sees: its view, or c itself
// for "" (no profile: every tool). A profile c has no view of (a reload
// dropped it) sees an empty catalog.
func (c *Catalog[S]) For(profile string) *Catalog[S] {
	if profile == "" {
		return c
	}
	if v := c.views[profile]; v != nil {
		return v
	}
	return c.empty()
}

// empty returns a catalog with nothing in it.
func (c *Catalog[S]) empty() *Catalog[S] {
	e := &Catalog[S]{routes: map[string]*Route[S]{}}
	e.fullJSON = encodeTools[S](nil, nil)
	e.listJSON = e.fullJSON
	e.caps = served{}.advertised()
	return e
}

// sameViews reports whether two catalogs have the same profiles and
// same(view of a, view of b) holds for each.
func sameViews[S any](a, b *Catalog[S], same func(v, w *Catalog[S]) bool) bool {
	if len(a.views) != len(b.views) {
		return false
	}
	for name, v := range a.views {
		w := b.views[name]
		if w == nil || !same(v, w) {
			return false
		}
	}
	return true
}

// ProfileSizes is how many tools each profile's view lists, by name.
func (c *Catalog[S]) ProfileSizes() map[string]int {
	out := make(map[string]int, len(c.views))
	for name, v := range c.views {
		out[name] = v.Len()
	}
	return out
}
