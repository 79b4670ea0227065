// Package toolpin pins the tool definitions servers list: the first time
// mcp-mux sees a tool of a server whose pin_tools is "warn" or "block", it
// records the hash of the tool's title, description, schemas and
// annotations as the server gave them (before tool_overrides) in a store
// every replica shares (Redis, else a bbolt file); a later list that
// changes them is a change. In warn mode a change is logged, counted and
// listed, and the new definition is served; in block mode the pinned
// definition goes on being served and calls of the tool are refused, until
// an operator accepts the new definition (Accept), which pins it for every
// replica. Tools that appear later are pinned on sight; a removed tool
// keeps its pin. The catalog stays pure: callers check each server's list
// (Check) before building it. No proxy wiring.
package toolpin

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
)

// The modes of a server's pin_tools.
const (
	Off   = "off"
	Warn  = "warn"
	Block = "block"
)

// DefaultTimeout bounds the store work of one Check, Refused or Accept.
const DefaultTimeout = 10 * time.Second

// Errors of Accept.
var (
	ErrNotFound = errors.New("no such pinned tool")
	ErrNothing  = errors.New("the tool's definition has not changed since it was pinned")
)

// Tool is one tool as its server listed it.
type Tool struct {
	Name string
	Raw  json.RawMessage
}

// Change is a tool whose definition differs from its pin, waiting for an
// operator to accept it. It names parts, never their text.
type Change struct {
	Server string    `json:"server"`
	Tool   string    `json:"tool"`
	Mode   string    `json:"mode"`  // the server's pin_tools when it was last checked
	Parts  []string  `json:"parts"` // Part… constants that differ
	Since  time.Time `json:"since"` // when this replica first saw the definition
	// Held is block mode's: the pinned definition is served (false: the
	// tool is withheld, its definition not kept or not readable).
	Held bool `json:"held"`

	hash string          // the new definition's
	was  string          // the pin's
	rec  Record          // the new definition's pin
	raw  json.RawMessage // the new definition
}

// Options configure New.
type Options struct {
	// Store keeps the pins; when nil, Open makes it at first use (and
	// again after a failure).
	Store Store
	Open  func() (Store, error)
	Log   hclog.Logger
	// Timeout bounds the store work of one Check, Refused or Accept
	// (default DefaultTimeout).
	Timeout time.Duration
	// MaxPins bounds the pins of one server (default and at most MaxPins).
	MaxPins int
	Now     func() time.Time
}

// Guard checks servers' tool lists against their pins.
type Guard struct {
	o       Options
	changes *prometheus.CounterVec // by server and mode
	kick    chan struct{}          // Changed

	mu       sync.Mutex
	store    Store
	pending  map[key]*Change     // changed tools, from each server's last Check
	listed   map[string][]string // each checked server's tools at its last Check
	unpinned map[key]string      // tools block mode withholds for want of a pin: why
	down     map[string]bool     // block-mode servers whose last Check could not read the store
}

// key is a server's tool.
type key struct{ server, tool string }

// New returns a Guard over o's store.
func New(o Options) *Guard {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxPins <= 0 || o.MaxPins > MaxPins {
		o.MaxPins = MaxPins
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
	return &Guard{o: o, store: o.Store, kick: make(chan struct{}, 1), pending: make(map[key]*Change), listed: make(map[string][]string),
		unpinned: make(map[key]string), down: make(map[string]bool), changes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcp_mux_tool_definition_changes_total",
			Help: "Tool definitions a server changed after they were pinned (pin_tools), by server and mode; each new definition counted once per replica.",
		}, []string{"server", "mode"})}
}

// Changed receives when a pin changed in the store — accepted here or
// found accepted on another replica — so that the catalog is built again
// (which Check is part of). Never sent from within Check.
func (g *Guard) Changed() <-chan struct{} { return g.kick }

// changed signals Changed without blocking.
func (g *Guard) changed() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// Register adds mcp_mux_tool_definition_changes_total to reg.
func (g *Guard) Register(reg prometheus.Registerer) error {
	if err := reg.Register(g.changes); err != nil {
		return fmt.Errorf("toolpin: metrics: %w", err)
	}
	return nil
}

// st returns the store, opening it first when it is not yet open.
func (g *Guard) st() (Store, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.store != nil {
		return g.store, nil
	}
	if g.o.Open == nil {
		return nil, errors.New("no pins store")
	}
	st, err := g.o.Open()
	if err != nil {
		return nil, fmt.Errorf("opening the pins store: %w", err)
	}
	g.store = st
	return st, nil
}

// Close closes the store, if it was opened.
func (g *Guard) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.store == nil {
		return nil
	}
	err := g.store.Close()
	g.store = nil
	return err
}

// Pending returns up to n changes waiting for an operator, oldest first,
// and how many there are.
func (g *Guard) Pending(n int) ([]Change, int) {
	g.mu.Lock()
	out := make([]Change, 0, len(g.pending))
	for _, c := range g.pending {
		out = append(out, *c)
	}
	g.mu.Unlock()
	slices.SortFunc(out, func(a, b Change) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		if a.Server != b.Server {
			return compare(a.Server, b.Server)
		}
		return compare(a.Tool, b.Tool)
	})
	return out[:min(n, len(out))], len(out)
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Retain forgets the servers not in servers (no longer configured).
func (g *Guard) Retain(servers []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := range g.pending {
		if !slices.Contains(servers, k.server) {
			delete(g.pending, k)
		}
	}
	for k := range g.unpinned {
		if !slices.Contains(servers, k.server) {
			delete(g.unpinned, k)
		}
	}
	for s := range g.listed {
		if !slices.Contains(servers, s) {
			delete(g.listed, s)
		}
	}
	for s := range g.down {
		if !slices.Contains(servers, s) {
			delete(g.down, s)
		}
	}
}

// validName reports whether a tool's name can be a pin's key: printable
// and within bounds.Name.
func validName(name string) bool {
	return name != "" && bounds.Printable("tool name", name, bounds.Name) == nil
}
