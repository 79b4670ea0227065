package catalog

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Routing hints and the initialize instructions.
//
// Each tool's effective routing is its server's routing updated with the
// fields its tools.<raw>.routing override sets (config.Server.ToolRouting).
// A prefer-mode tool carries it in its tool object as _meta["mux/routing"];
// prefer-mode tools with keywords are rendered into the initialize result's
// instructions as DeerFlow's <mcp_routing_hints> section. Priorities are
// clamped to 0..100 by config, which warns.

// Meta keys mcp-mux adds to tool objects.
const (
	metaRouting = "mux/routing" // effective routing of a prefer-mode tool
	metaServer  = "mux/server"  // {name, description} when the server has a description
)

// routingMeta is the value of _meta["mux/routing"].
type routingMeta struct {
	Mode     string   `json:"mode"`
	Priority int      `json:"priority"`
	Keywords []string `json:"keywords"`
}

// serverMeta is the value of _meta["mux/server"].
type serverMeta struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

// toolMeta returns the _meta members mcp-mux adds to a tool, or nil.
func toolMeta(sc *config.Server, rt config.Routing) map[string]any {
	var m map[string]any
	if rt.Mode == config.RoutingPrefer {
		kw := rt.Keywords
		if kw == nil {
			kw = []string{}
		}
		m = map[string]any{metaRouting: routingMeta{Mode: rt.Mode, Priority: rt.Priority, Keywords: kw}}
	}
	if sc != nil && sc.Description != "" {
		if m == nil {
			m = map[string]any{}
		}
		m[metaServer] = serverMeta{Name: sc.Name, Description: sc.Description}
	}
	return m
}

// renameTool returns the tool (or prompt) object with "name" set to the
// visible name and every other member byte-for-byte as the upstream sent it.
func renameTool(t upstream.Tool, name string) json.RawMessage {
	return toolJSON(t, name, nil)
}

// toolJSON is renameTool plus meta merged into the tool's _meta object. The
// upstream's bytes are returned as they are when nothing changes, and when
// the object or its _meta does not decode.
func toolJSON(t upstream.Tool, name string, meta map[string]any) json.RawMessage {
	if name == t.Name && len(meta) == 0 {
		return t.Raw
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(t.Raw, &obj); err != nil || obj == nil {
		return t.Raw
	}
	obj["name"], _ = json.Marshal(name)
	if len(meta) > 0 && !mergeMeta(obj, meta) {
		return t.Raw
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return t.Raw
	}
	return b
}

// mergeMeta sets meta's members in obj's _meta object, creating it when
// absent or null. It reports false when the existing _meta does not decode.
func mergeMeta(obj map[string]json.RawMessage, meta map[string]any) bool {
	var m map[string]json.RawMessage
	if raw, ok := obj["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &m); err != nil {
			return false
		}
	}
	if m == nil {
		m = make(map[string]json.RawMessage, len(meta))
	}
	for k, v := range meta {
		m[k], _ = json.Marshal(v)
	}
	obj["_meta"], _ = json.Marshal(m)
	return true
}

// promptEscaper is Python's html.escape(s, quote=False): a tool name or
// keyword cannot close a section and forge a tag of its own.
var promptEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// hint is one rendered routing hint.
type hint struct {
	priority int
	name     string
	keywords []string
	deferred bool // the tool is behind tool_search (the fetch wording)
}

// routingHints renders DeerFlow's <mcp_routing_hints> section for the
// prefer-mode routes with keywords, ordered by priority (high first) then
// name; "" when there are none. A hint of a tool search defers (nil: no
// tool_search) has the tool_search wording.
func routingHints[S any](routes []*Route[S], search *searchIndex) string {
	var hs []hint
	for _, r := range routes {
		if r.routing.Mode != config.RoutingPrefer || len(r.routing.Keywords) == 0 {
			continue
		}
		hs = append(hs, hint{r.routing.Priority, r.Name, r.routing.Keywords, search.defers(r.idx)})
	}
	return renderHints(hs)
}

// byPriorityThenName orders hints high priority first, then by name.
func byPriorityThenName(a, b hint) int {
	if c := cmp.Compare(b.priority, a.priority); c != 0 {
		return c
	}
	return strings.Compare(a.name, b.name)
}

// renderHints renders the hints section; "" when there are none.
func renderHints(hs []hint) string {
	if len(hs) == 0 {
		return ""
	}
	slices.SortStableFunc(hs, byPriorityThenName)
	var sb strings.Builder
	sb.WriteString("<mcp_routing_hints>")
	for _, h := range hs {
		writeHint(&sb, h)
	}
	sb.WriteString("\n</mcp_routing_hints>")
	return sb.String()
}

// writeHint writes one hint's lines, names and keywords escaped.
func writeHint(sb *strings.Builder, h hint) {
	kw := make([]string, len(h.keywords))
	for i, k := range h.keywords {
		kw[i] = promptEscaper.Replace(k)
	}
	name := promptEscaper.Replace(h.name)
	sb.WriteString("\nWhen the user's request involves ")
	sb.WriteString(keywordList(kw))
	sb.WriteString(":\n")
	if h.deferred {
		sb.WriteString("  use `tool_search` to fetch `" + name + "`, then prefer that MCP tool.")
	} else {
		sb.WriteString("  prefer the `" + name + "` tool.")
	}
}

// keywordList joins keywords as DeerFlow does: "a", "a, or b", "a, b, or c".
func keywordList(kw []string) string {
	if len(kw) == 1 {
		return kw[0]
	}
	return strings.Join(kw[:len(kw)-1], ", ") + ", or " + kw[len(kw)-1]
}

// deferredSection renders DeerFlow's <available-deferred-tools> section: the
// sorted, escaped names; "" when there are none.
func deferredSection(names []string) string {
	if len(names) == 0 {
		return ""
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	var sb strings.Builder
	sb.WriteString("<available-deferred-tools>\n")
	for _, n := range sorted {
		sb.WriteString(promptEscaper.Replace(n))
		sb.WriteByte('\n')
	}
	sb.WriteString("</available-deferred-tools>")
	return sb.String()
}

// instructions renders the initialize result's instructions for a catalog's
// listed routes: the deferred-tools section when tool_search is on, then the
// routing hints, separated by a blank line as in DeerFlow's prompt template.
// search is the catalog's tool_search index (nil: off); its always-listed
// tools are not deferred.
func instructions[S any](routes []*Route[S], search *searchIndex) string {
	var parts []string
	if search != nil {
		if s := deferredSection(search.deferredNames()); s != "" {
			parts = append(parts, s)
		}
	}
	if s := routingHints(routes, search); s != "" {
		parts = append(parts, s)
	}
	return strings.Join(parts, "\n\n")
}

// routeNames returns the routes' visible names.
func routeNames[S any](routes []*Route[S]) []string {
	names := make([]string, len(routes))
	for i, r := range routes {
		names[i] = r.Name
	}
	return names
}
