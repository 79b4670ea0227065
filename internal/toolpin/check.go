package toolpin

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
)

// Check returns what to serve of tools, server's list as its last
// discovery had it, under mode (the server's pin_tools): tools pinned
// now where they have no pin; in block mode, a changed tool's pinned
// definition in its place (or nothing, when that is not kept); in warn
// mode, tools as they are. Changes are logged and counted once per new
// definition, and listed until accepted. When the store cannot be read,
// block mode serves none of the server's tools and warn mode serves them
// as they are. Off forgets the server.
func (g *Guard) Check(server, mode string, tools []Tool) []Tool {
	if mode != Warn && mode != Block {
		g.forget(server)
		return tools
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.o.Timeout)
	defer cancel()
	r := &round{g: g, ctx: ctx, server: server, mode: mode, pending: make(map[key]*Change), unpinned: make(map[key]string)}
	out, err := r.run(tools)
	if err != nil {
		if mode == Block {
			g.o.Log.Error("pins could not be checked: serving none of the server's tools (pin_tools block)", "server", server, "err", err)
			g.mu.Lock()
			g.down[server] = true
			g.mu.Unlock()
			out = nil
		} else {
			g.o.Log.Warn("pins could not be checked: serving the server's tools unchecked (pin_tools warn)", "server", server, "err", err)
			out = tools
		}
		return out // what the server's last Check found stands
	}
	g.settle(r)
	return out
}

// forget drops what the Guard knows of server.
func (g *Guard) forget(server string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.pending {
		if k.server == server {
			delete(g.pending, k)
		}
	}
	for k := range g.unpinned {
		if k.server == server {
			delete(g.unpinned, k)
		}
	}
	delete(g.listed, server)
	delete(g.down, server)
}

// round is one Check of one server's list.
type round struct {
	g        *Guard
	ctx      context.Context
	server   string
	mode     string
	st       Store
	names    []string
	pending  map[key]*Change
	unpinned map[key]string
}

// run checks tools and returns what to serve.
func (r *round) run(tools []Tool) ([]Tool, error) {
	st, err := r.g.st()
	if err != nil {
		return nil, err
	}
	r.st = st
	names := make([]string, 0, len(tools))
	for _, t := range tools {
		if validName(t.Name) {
			names = append(names, t.Name)
		}
	}
	recs, err := st.records(r.ctx, r.server, names)
	if err != nil {
		return nil, err
	}
	r.names = names
	out := make([]Tool, 0, len(tools))
	for _, t := range tools {
		served, ok, err := r.tool(t, recs[t.Name])
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, served)
		}
	}
	return out, nil
}

// tool checks one tool against its pin (nil: none yet) and returns what
// to serve of it (false: nothing).
func (r *round) tool(t Tool, pin *Record) (Tool, bool, error) {
	now := Digest(t.Raw)
	if !validName(t.Name) {
		return t, r.withhold(t, "its name cannot be pinned (not printable text of at most 128 bytes)"), nil
	}
	if pin == nil {
		now.At = r.g.o.Now()
		var err error
		pin, err = r.st.add(r.ctx, r.server, t.Name, &now, kept(t.Raw), r.g.o.MaxPins)
		if errors.Is(err, ErrFull) {
			return t, r.withhold(t, fmt.Sprintf("the server has %d pinned tools, as many as mcp-mux keeps", r.g.o.MaxPins)), nil
		}
		if err != nil {
			return t, false, err
		}
	}
	if pin.Hash == now.Hash {
		return t, true, nil
	}
	c := &Change{Server: r.server, Tool: t.Name, Mode: r.mode, Parts: Diff(pin, &now), hash: now.Hash, was: pin.Hash, rec: now, raw: t.Raw}
	r.pending[key{r.server, t.Name}] = c
	if r.mode == Warn {
		return t, true, nil
	}
	def, err := r.st.definition(r.ctx, r.server, t.Name)
	if err != nil {
		return t, false, err
	}
	if def == nil || Digest(def).Hash != pin.Hash {
		return t, false, nil // not kept (past MaxDefinition) or damaged: withheld
	}
	c.Held = true
	return Tool{Name: t.Name, Raw: def}, true, nil
}

// withhold notes a tool that cannot be pinned, for why, and reports
// whether it is served: in warn mode yes, in block mode no (its calls are
// refused too).
func (r *round) withhold(t Tool, why string) bool {
	if r.mode == Warn {
		return true
	}
	r.unpinned[key{r.server, t.Name}] = why
	return false
}

// settle makes r's findings the server's: new changes logged and counted,
// the server's previous ones replaced.
func (g *Guard) settle(r *round) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.down, r.server)
	for k, c := range r.pending {
		if old := g.pending[k]; old != nil && old.hash == c.hash {
			c.Since = old.Since
			continue
		}
		c.Since = g.o.Now()
		g.changes.WithLabelValues(r.server, r.mode).Inc()
		g.o.Log.Warn("a server changed a pinned tool definition", "server", r.server, "tool", c.Tool, "parts", c.Parts,
			"mode", r.mode, "served", served(c))
	}
	for k := range g.pending {
		if k.server == r.server && r.pending[k] == nil {
			delete(g.pending, k)
		}
	}
	for k, why := range r.unpinned {
		if _, had := g.unpinned[k]; !had {
			g.o.Log.Warn("withholding a tool that cannot be pinned (pin_tools block)", "server", r.server, "tool", fmt.Sprintf("%q", bounds.Clip(k.tool, bounds.Name)), "reason", why)
		}
	}
	for k := range g.unpinned {
		if k.server == r.server && r.unpinned[k] == "" {
			delete(g.unpinned, k)
		}
	}
	copyInto(g.pending, r.pending)
	copyInto(g.unpinned, r.unpinned)
	g.listed[r.server] = r.names
}

// copyInto copies src into dst.
func copyInto[V any](dst, src map[key]V) {
	for k, v := range src {
		dst[k] = v
	}
}

// served says what a change's tool serves, for its log line.
func served(c *Change) string {
	switch {
	case c.Mode == Warn:
		return "new definition"
	case c.Held:
		return "pinned definition; calls refused until accepted"
	}
	return "nothing (the pinned definition is not kept); calls refused until accepted"
}
