package toolpin

import (
	"context"
	"slices"
	"strings"
)

// Refused says why a call of server's tool is refused — its definition
// changed under block mode and was not accepted, or it cannot be pinned —
// and "" when it may run. A change another replica accepted meanwhile is
// found in the store (one read): the call runs, and Changed is signalled.
func (g *Guard) Refused(ctx context.Context, server, tool string) string {
	k := key{server, tool}
	g.mu.Lock()
	c, why, down := g.pending[k], g.unpinned[k], g.down[server]
	g.mu.Unlock()
	switch {
	case down:
		return "the server's pinned definitions could not be read"
	case why != "":
		return why
	}
	if c == nil || c.Mode != Block {
		return ""
	}
	if g.acceptedElsewhere(ctx, c) {
		return ""
	}
	return "its definition changed since it was pinned (" + strings.Join(c.Parts, ", ") + ")"
}

// acceptedElsewhere reports whether the store now pins c's new definition
// (accepted on another replica); then c is no longer pending and Changed
// is signalled.
func (g *Guard) acceptedElsewhere(ctx context.Context, c *Change) bool {
	st, err := g.st()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	recs, err := st.records(ctx, c.Server, []string{c.Tool})
	if err != nil {
		g.o.Log.Warn("reading a pin", "server", c.Server, "tool", c.Tool, "err", err)
		return false
	}
	if r := recs[c.Tool]; r == nil || r.Hash != c.hash {
		return false
	}
	g.mu.Lock()
	if g.pending[key{c.Server, c.Tool}] == c {
		delete(g.pending, key{c.Server, c.Tool})
	}
	g.mu.Unlock()
	g.changed()
	return true
}

// Accept pins the definition server now lists for tool, on every replica
// (the store is shared), and returns the change it settles: ErrNotFound
// for a tool the server's last Check did not list, ErrNothing for one
// that has not changed. Changed is signalled.
func (g *Guard) Accept(ctx context.Context, server, tool string) (*Change, error) {
	k := key{server, tool}
	g.mu.Lock()
	c, listed := g.pending[k], slices.Contains(g.listed[server], tool)
	g.mu.Unlock()
	switch {
	case c == nil && listed:
		return nil, ErrNothing
	case c == nil:
		return nil, ErrNotFound
	}
	st, err := g.st()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	rec := c.rec
	rec.At = g.o.Now()
	if err := st.put(ctx, server, tool, &rec, kept(c.raw)); err != nil {
		return nil, err
	}
	g.mu.Lock()
	if g.pending[k] == c {
		delete(g.pending, k)
	}
	g.mu.Unlock()
	g.o.Log.Info("a changed tool definition was accepted", "server", server, "tool", tool, "parts", c.Parts)
	g.changed()
	out := *c
	return &out, nil
}

// Recheck reads the pins of the changes waiting and reports whether any
// changed in the store since they were found (accepted on another
// replica): then the catalog should be built again. One store read per
// server with changes; none without.
func (g *Guard) Recheck(ctx context.Context) bool {
	g.mu.Lock()
	by := make(map[string][]*Change)
	for _, c := range g.pending {
		by[c.Server] = append(by[c.Server], c)
	}
	g.mu.Unlock()
	if len(by) == 0 {
		return false
	}
	st, err := g.st()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, g.o.Timeout)
	defer cancel()
	for server, cs := range by {
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = c.Tool
		}
		recs, err := st.records(ctx, server, names)
		if err != nil {
			g.o.Log.Warn("rechecking pins", "server", server, "err", err)
			continue
		}
		for _, c := range cs {
			if r := recs[c.Tool]; r != nil && r.Hash != c.was {
				return true
			}
		}
	}
	return false
}
