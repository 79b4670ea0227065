// Package reload decides how a config change reaches the running proxy, and
// maps config onto the options of the libraries the proxy runs servers and
// callers with.
//
// Plan is pure: from the running servers and the new config it returns one
// Action per server — keep, reconnect, skip, refuse or drop — and, for the
// servers that run on, whether their header resolver is reused, built anew
// or not needed. The proxy's executor (proxy/apply.go) carries the actions
// out. Nothing here opens a connection or starts a process.
package reload

import (
	"slices"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/headers"
)

// Kind is what becomes of one server.
type Kind int

const (
	// Keep shares the running upstream (its connection settings are
	// unchanged) and takes the new presentation settings.
	Keep Kind = iota
	// Reconnect starts a new upstream: the server is new, its connection
	// settings changed, or every server was asked to reconnect.
	Reconnect
	// Skip holds the running server at its last good settings: the new
	// ones are invalid.
	Skip
	// Refuse holds the running server at its settings, or leaves out a
	// server the config adds (Prev -1): the change was refused
	// (Options.Refuse said no); Problem says why.
	Refuse
	// Drop leaves the running server out of the new runtime: it was
	// removed or disabled.
	Drop
)

// kindNames are the Kinds' names, for String.
var kindNames = [...]string{Keep: "keep", Reconnect: "reconnect", Skip: "skip", Refuse: "refuse", Drop: "drop"}

// String returns the kind's name.
func (k Kind) String() string { return kindNames[k] }

// Resolver is what a kept or reconnected server does for its header
// resolver.
type Resolver int

const (
	// NoResolver: the server has no header rules (or is held or dropped).
	NoResolver Resolver = iota
	// ReuseResolver shares the running resolver, and so its OAuth token:
	// the connection settings and header inputs are unchanged.
	ReuseResolver
	// NewResolver builds a resolver from Action.Headers.
	NewResolver
)

// resolverNames are the Resolvers' names, for String.
var resolverNames = [...]string{NoResolver: "none", ReuseResolver: "reuse", NewResolver: "new"}

// String returns the resolver action's name.
func (r Resolver) String() string { return resolverNames[r] }

// Running is the plan's view of one running server.
type Running struct {
	Name        string
	Fingerprint string         // config.Server.Fingerprint of its upstream's settings
	HeaderKey   string         // HeaderKey of its resolver's inputs
	Server      *config.Server // its settings
}

// Options are Plan's inputs besides the running servers and the config.
type Options struct {
	// Fresh gives every server that runs on a new upstream (resolvers are
	// still reused).
	Fresh bool
	// Refuse, when set, is asked before a running server is replaced by
	// next (nil: removed or disabled) — its connection settings or
	// task_toolsets changed, or Fresh — and before a server the config adds
	// is started (running nil). An error refuses the change and is its
	// Problem: a running server is held, an added one is left out.
	Refuse func(running, next *config.Server) error
}

// Action is what becomes of one server.
type Action struct {
	Name     string
	Kind     Kind
	Resolver Resolver
	// Prev indexes the running server the action starts from; -1 for none.
	Prev int
	// Next is the server's new settings (Keep and Reconnect).
	Next *config.Server
	// Fingerprint and HeaderKey are Next's (Keep and Reconnect).
	Fingerprint, HeaderKey string
	// Headers are the resolver options to build from (NewResolver); the
	// executor adds the logger.
	Headers *headers.Options
	// Problem is why a running server is held (Skip and Refuse).
	Problem string
}

// invalidKept is the problem of a running server whose new settings are invalid.
const invalidKept = "the new settings are invalid; kept the running ones"

// Plan returns the actions that take the running servers to cfg, in the
// order the executor carries them out: running servers invalid in cfg (in
// running order), then cfg's servers (in config order), then running servers
// cfg no longer names (in running order). A server that is neither running
// nor enabled gets no action. Plan calls opts.Refuse in that order too.
func Plan(running []Running, cfg *config.Config, opts Options) []Action {
	p := planner{running: running, opts: opts, byName: make(map[string]int, len(running))}
	for i, r := range running {
		p.byName[r.Name] = i
	}
	p.index(cfg)
	p.skipInvalid()
	for _, sc := range cfg.Servers {
		p.server(sc)
	}
	p.dropRemoved()
	return p.out
}

// planner is one Plan call's state.
type planner struct {
	running []Running
	opts    Options
	byName  map[string]int  // running server name → index
	invalid map[string]bool // servers invalid in the new config
	inNew   map[string]bool // servers the new config names
	carrier string          // inbound.secrets_header
	out     []Action
}

// index records which servers the new config names and which it has as invalid.
func (p *planner) index(cfg *config.Config) {
	p.carrier = cfg.Inbound.SecretsHeader
	p.invalid = make(map[string]bool, len(cfg.Invalid))
	for _, se := range cfg.Invalid {
		p.invalid[se.Name] = true
	}
	p.inNew = make(map[string]bool, len(cfg.Servers))
	for _, sc := range cfg.Servers {
		p.inNew[sc.Name] = true
	}
}

// skipInvalid holds each running server that is invalid in the new config
// (and not also named by it) at its last good settings.
func (p *planner) skipInvalid() {
	for i, r := range p.running {
		if p.invalid[r.Name] && !p.inNew[r.Name] {
			p.out = append(p.out, Action{Name: r.Name, Kind: Skip, Prev: i, Problem: invalidKept})
		}
	}
}

// dropRemoved drops, or holds when refused, each running server the new
// config no longer names.
func (p *planner) dropRemoved() {
	for i, r := range p.running {
		if !p.inNew[r.Name] && !p.invalid[r.Name] {
			p.leave(i)
		}
	}
}

// server plans one server of the new config.
func (p *planner) server(sc *config.Server) {
	prev, running := p.byName[sc.Name]
	if !running {
		prev = -1
	}
	if !sc.Enabled {
		if running {
			p.leave(prev)
		}
		return
	}
	a := Action{Name: sc.Name, Kind: Keep, Prev: prev, Next: sc, Fingerprint: sc.Fingerprint()}
	a.Headers = HeaderOptions(sc, p.carrier)
	a.HeaderKey = HeaderKey(a.Headers)
	if !running || p.opts.Fresh || p.running[prev].Fingerprint != a.Fingerprint || !slices.Equal(p.running[prev].Server.TaskToolsets, sc.TaskToolsets) {
		if msg, refused := p.refuse(prev, sc); refused {
			p.out = append(p.out, Action{Name: sc.Name, Kind: Refuse, Prev: prev, Problem: msg})
			return
		}
	}
	p.out = append(p.out, p.connect(a))
}

// connect settles a server that runs on: whether it keeps its upstream,
// and what it does for its resolver.
func (p *planner) connect(a Action) Action {
	same := a.Prev >= 0 && p.running[a.Prev].Fingerprint == a.Fingerprint
	switch {
	case a.Headers == nil: // no header rules: NoResolver
	case same && p.running[a.Prev].HeaderKey == a.HeaderKey:
		a.Resolver, a.Headers = ReuseResolver, nil
	default:
		a.Resolver = NewResolver
	}
	if !same || p.opts.Fresh {
		a.Kind = Reconnect
	}
	return a
}

// leave plans a running server's leaving (removed or disabled): dropped,
// or held when the change is refused.
func (p *planner) leave(i int) {
	name := p.running[i].Name
	if msg, refused := p.refuse(i, nil); refused {
		p.out = append(p.out, Action{Name: name, Kind: Refuse, Prev: i, Problem: msg})
		return
	}
	p.out = append(p.out, Action{Name: name, Kind: Drop, Prev: i})
}

// refuse asks Options.Refuse whether running server i (-1: none, next is
// added) may become next.
func (p *planner) refuse(i int, next *config.Server) (string, bool) {
	if p.opts.Refuse == nil {
		return "", false
	}
	var running *config.Server
	if i >= 0 {
		running = p.running[i].Server
	}
	if err := p.opts.Refuse(running, next); err != nil {
		return err.Error(), true
	}
	return "", false
}
