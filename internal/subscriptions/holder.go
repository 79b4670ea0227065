package subscriptions

import (
	"fmt"
	"sync"

	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Holder is one downstream session's (or listen stream's) subscribed
// resource URIs. The zero value holds none; a Holder must not be copied
// once used (the tables know it by address).
type Holder struct {
	mu   sync.Mutex
	uris map[string]bool
}

// Mark records uri as subscribed (on) or not, without asking any
// upstream: for resources mcp-mux serves itself.
func (h *Holder) Mark(uri string, on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.uris == nil {
		h.uris = make(map[string]bool)
	}
	if on {
		h.uris[uri] = true
	} else {
		delete(h.uris, uri)
	}
}

// URIs returns the subscribed URIs.
func (h *Holder) URIs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.uris))
	for uri := range h.uris {
		out = append(out, uri)
	}
	return out
}

// Has reports whether uri is subscribed.
func (h *Holder) Has(uri string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.uris[uri]
}

// take marks uri subscribed, unless h holds MaxPerHolder already. Called
// with h.mu held.
func (h *Holder) take(uri string) error {
	if len(h.uris) >= MaxPerHolder {
		return &wire.Error{Code: admission.CodeLimit, Message: fmt.Sprintf(
			"this session holds %d resource subscriptions, the most mcp-mux allows per session; unsubscribe from one first", len(h.uris))}
	}
	if h.uris == nil {
		h.uris = make(map[string]bool)
	}
	h.uris[uri] = true
	return nil
}
