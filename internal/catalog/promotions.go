package catalog

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"
)

// Promotions are the deferred tools one session promoted with tool_search.
// They live as long as the session and survive catalog changes for the
// tools that still exist. The zero value is ready to use.
type Promotions[S any] struct {
	mu    sync.Mutex
	names map[string]bool
	cat   *Catalog[S]     // the catalog names were last checked against
	list  json.RawMessage // tools/list for cat, built on demand
}

// syncLocked drops promotions of tools cat no longer lists. p.mu is held.
func (p *Promotions[S]) syncLocked(cat *Catalog[S]) {
	if p.cat == cat {
		return
	}
	for n := range p.names {
		if !cat.listed(n) {
			delete(p.names, n)
		}
	}
	p.cat, p.list = cat, nil
}

// listed reports whether cat lists a tool named name.
func (c *Catalog[S]) listed(name string) bool {
	r := c.routes[name]
	return r != nil && r.Deny == nil
}

// Has reports whether the session promoted name and cat still lists it.
func (p *Promotions[S]) Has(cat *Catalog[S], name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked(cat)
	return p.names[name]
}

// Add promotes names and reports whether any was new.
func (p *Promotions[S]) Add(cat *Catalog[S], names []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked(cat)
	if p.names == nil {
		p.names = make(map[string]bool, len(names))
	}
	added := false
	for _, n := range names {
		if !p.names[n] {
			p.names[n], added = true, true
		}
	}
	if added {
		p.list = nil
	}
	return added
}

// ListFor returns the tools/list result the session had under cat (a
// catalog it may since have moved on from), without changing its state.
func (p *Promotions[S]) ListFor(cat *Catalog[S]) json.RawMessage {
	if cat.search == nil {
		return cat.listJSON
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cat == cat && p.list != nil {
		return p.list
	}
	var routes []*Route[S]
	for n := range p.names {
		if cat.listed(n) {
			routes = append(routes, cat.routes[n])
		}
	}
	return promotedList(cat, routes)
}

// ToolsList returns the session's tools/list result under cat: every
// listed tool, or under tool_search its promoted tools in catalog order,
// then tool_search. The result is cached until the promotions or the
// catalog change.
func (p *Promotions[S]) ToolsList(cat *Catalog[S]) json.RawMessage {
	if cat.search == nil {
		return cat.listJSON
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked(cat)
	if len(p.names) == 0 {
		return cat.search.list
	}
	if p.list == nil {
		routes := make([]*Route[S], 0, len(p.names))
		for n := range p.names {
			routes = append(routes, cat.routes[n])
		}
		p.list = promotedList(cat, routes)
	}
	return p.list
}

// promotedList encodes the promoted routes and the always-listed ones in
// catalog order, then tool_search; with none promoted, the catalog's list.
func promotedList[S any](cat *Catalog[S], routes []*Route[S]) json.RawMessage {
	if len(routes) == 0 {
		return cat.search.list
	}
	for _, i := range cat.search.always {
		routes = append(routes, cat.order[i])
	}
	slices.SortFunc(routes, func(a, b *Route[S]) int { return cmp.Compare(a.idx, b.idx) })
	return encodeTools(slices.Compact(routes), toolSearchTool)
}

// AlwaysListed reports whether tool_search leaves the tool name listed
// (tool_search.always_listed): callable without a promotion.
func (c *Catalog[S]) AlwaysListed(name string) bool {
	r := c.routes[name]
	return c.search != nil && r != nil && r.Deny == nil && !c.search.defers(r.idx)
}
