package catalog

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Contradicting annotations: an override's annotations are set over the
// server's one field at a time, so the tool a client sees can say both
// readOnlyHint: true (it does not modify its environment) and
// destructiveHint: true (it may destroy something) — the server's hint
// beside the override's, or the override's own two. Clients that trust the
// read-only hint then run a destructive tool without asking. The catalog
// notes each such tool (by server and raw tool name, and which side set
// each hint, never a value beyond the hints' names); the mux logs a new one
// once (LogWarnings) and shows the current ones on the status page.

// conflict is one tool whose overridden annotations contradict each other.
type conflict struct {
	server, tool string
	// readOnly and destructive say who set each hint: "override" or "server".
	readOnly, destructive string
}

// String is the conflict as the status page and the log show it.
func (c conflict) String() string {
	return fmt.Sprintf("server %q, tool %q: annotations contradict each other: readOnlyHint (%s) and destructiveHint (%s) are both true; clients may treat a destructive tool as read-only",
		c.server, c.tool, c.readOnly, c.destructive)
}

// annotationConflict returns the conflict the override annotations a make
// with the tool's own (raw, the server's tool object), if any: the tool as
// listed has readOnlyHint and destructiveHint both true, and a set at least
// one of them.
func annotationConflict(server, tool string, raw json.RawMessage, a *config.ToolAnnotations) (conflict, bool) {
	if a == nil || (a.ReadOnlyHint == nil && a.DestructiveHint == nil) {
		return conflict{}, false
	}
	var own struct {
		Annotations struct {
			ReadOnlyHint    *bool `json:"readOnlyHint"`
			DestructiveHint *bool `json:"destructiveHint"`
		} `json:"annotations"`
	}
	_ = json.Unmarshal(raw, &own) // a server's annotations that do not decode count as none
	ro, roBy := effectiveHint(a.ReadOnlyHint, own.Annotations.ReadOnlyHint)
	de, deBy := effectiveHint(a.DestructiveHint, own.Annotations.DestructiveHint)
	if !ro || !de {
		return conflict{}, false
	}
	return conflict{server: bounds.Clip(server, bounds.Name), tool: bounds.Clip(tool, bounds.Name), readOnly: roBy, destructive: deBy}, true
}

// noteConflict notes a listed tool of server whose override annotations a
// contradict its own.
func (c *Catalog[S]) noteConflict(server string, t upstream.Tool, a *config.ToolAnnotations) {
	if x, ok := annotationConflict(server, t.Name, t.Raw, a); ok {
		c.conflicts = append(c.conflicts, x)
	}
}

// effectiveHint is a hint as listed — the override's when it sets one, else
// the server's — and who set it.
func effectiveHint(override, own *bool) (bool, string) {
	if override != nil {
		return *override, "override"
	}
	return own != nil && *own, "server"
}

// Warnings are the catalog's tools whose overridden annotations contradict
// each other, one text each, in build order.
func (c *Catalog[S]) Warnings() []string {
	out := make([]string, len(c.conflicts))
	for i, x := range c.conflicts {
		out[i] = x.String()
	}
	return out
}

// LogWarnings warns about the duplicates and contradicting annotations of
// next that prev (the catalog it replaces; nil for none) did not have. A
// catalog is rebuilt at every discovery, list change, reload and cache
// reset, so a warning comes once per change of the set instead of at every
// rebuild.
func LogWarnings[S any](prev, next *Catalog[S], log hclog.Logger) {
	var seenDups []duplicate
	var seenConflicts []conflict
	if prev != nil {
		seenDups, seenConflicts = prev.dups, prev.conflicts
	}
	for _, d := range next.dups {
		if !slices.Contains(seenDups, d) {
			log.Warn("duplicate "+d.what+"; keeping the first", d.field, d.key, "kept_server", d.kept, "skipped_server", d.skipped)
		}
	}
	for _, x := range next.conflicts {
		if !slices.Contains(seenConflicts, x) {
			log.Warn("tool annotations contradict each other: readOnlyHint and destructiveHint are both true; clients may treat a destructive tool as read-only",
				"server", x.server, "tool", x.tool, "readOnlyHint_from", x.readOnly, "destructiveHint_from", x.destructive)
		}
	}
}
