package upstream

import (
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Capability mirroring.
//
// A call session declares exactly what the downstream client behind it
// declared — roots (with listChanged), sampling (with context and tools),
// elicitation (with its form and url modes) — so a server never asks a
// client for something it cannot do, and a server that registers tools by
// client capability (npm server-everything does) offers that client what
// it would offer it directly. The discovery session has no client behind
// it: it declares all three, so that every tool a server can offer is
// discovered; it answers roots/list with no roots and refuses sampling and
// elicitation.

// Capabilities returns the key under which a downstream client's
// capabilities select call sessions (Key.Caps): the canonical JSON of its
// roots, sampling and elicitation capabilities. Sessions opened for one key
// declare exactly those capabilities.
func Capabilities(c *mcp.ClientCapabilities) string {
	var m mirrored
	if c != nil {
		m.Roots = c.RootsV2
		m.Sampling = c.Sampling
		m.Elicitation = c.Elicitation
		m.Extensions = uiCaps(c.Extensions) // appcaps.go
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// mirrored is the part of the client capabilities a call session mirrors.
type mirrored struct {
	Roots       *mcp.RootCapabilities        `json:"roots,omitempty"`
	Sampling    *mcp.SamplingCapabilities    `json:"sampling,omitempty"`
	Elicitation *mcp.ElicitationCapabilities `json:"elicitation,omitempty"`
	// Extensions is MCP Apps' entry only (appcaps.go).
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

// discoveryCaps is what the discovery session declares.
var discoveryCaps = &mcp.ClientCapabilities{
	RootsV2:     &mcp.RootCapabilities{ListChanged: true},
	Sampling:    &mcp.SamplingCapabilities{},
	Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
	Extensions:  uiOnly(discoveryUI), // appcaps.go
}

// clients holds one SDK client per capability set (the SDK declares a
// client's capabilities, not a session's) and whether it takes list
// changes. Capabilities canonicalizes through the SDK's types, so there are
// few distinct sets.
type clients struct {
	mu   sync.Mutex
	m    map[string]*mcp.Client
	make func(caps *mcp.ClientCapabilities, lists bool) *mcp.Client
}

// forKey returns the client for a session: the discovery client for the
// control session, else the one declaring key.Caps, with list-change
// handlers if lists (a 2026-07-28 session with them opens a
// subscriptions/listen).
func (cl *clients) forKey(key Key, control, lists bool) *mcp.Client {
	id := key.Caps
	switch {
	case control:
		id, lists = "\x00discovery", true
	case !lists:
		id += "\x00nolists"
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if c := cl.m[id]; c != nil {
		return c
	}
	caps := discoveryCaps
	if !control {
		var m mirrored
		_ = json.Unmarshal([]byte(key.Caps), &m) // "" or invalid: no capabilities
		caps = withUI(&mcp.ClientCapabilities{RootsV2: m.Roots, Sampling: m.Sampling, Elicitation: m.Elicitation}, m.Extensions)
	}
	if cl.m == nil {
		cl.m = make(map[string]*mcp.Client)
	}
	c := cl.make(caps, lists)
	cl.m[id] = c
	return c
}
