package catalog

import (
	"bytes"
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"unicode"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

// tool_search: deferred tool schemas (DeerFlow's tool_search, §3.2).
//
// With tool_search.enabled every listed tool is deferred. A session's
// tools/list shows the tool_search tool plus the tools that session has
// promoted (Promotions); the instructions list every deferred name.
// tool_search(query) returns the matched tools' schemas (DeerFlow's
// OpenAI-function shape, as JSON text), and the caller promotes them for
// the calling session only. Prefer-mode tools whose keywords occur in a
// search query are promoted and returned too, up to auto_promote_top_k (not
// for select:, which names its tools exactly). Calling a deferred tool the
// session has not promoted is a tool error with DeerFlow's text
// (DeferredError), as in DeerFlow's DeferredToolFilterMiddleware.

// ToolSearchName is the visible name of the tool_search tool.
const ToolSearchName = "tool_search"

// maxSearchResults is DeerFlow's MAX_RESULTS; select: is not capped.
const maxSearchResults = 5

// toolSearchTool is the tool object of tool_search.
var toolSearchTool = json.RawMessage(`{"name":"tool_search","description":` + mustJSON(toolSearchDescription) +
	`,"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What to search for; see the query forms in the description."}},"required":["query"]}}`)

const toolSearchDescription = `Fetches full schema definitions for deferred tools so they can be called.

Deferred tools appear by name in <available-deferred-tools> in the server instructions. Until fetched, only the name is known. This tool matches a query against the deferred tools and returns the matched tools' complete schemas; once returned, a tool is listed in tools/list and becomes callable.

Query forms:
  - "select:Read,Edit" -- fetch these exact tools by name
  - "notebook jupyter" -- keyword search (a case-insensitive regular expression over name and description), up to 5 best matches
  - "+slack send" -- require "slack" in the name, rank by remaining terms`

// mustJSON encodes a string as JSON, HTML-escaped as encoding/json does.
func mustJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// searchIndex is the deferred half of one catalog. Immutable.
type searchIndex struct {
	tools  []deferredTool // catalog order: tools[i] is the catalog's order[i]
	prefer []preferTool   // prefer-mode tools with keywords, by (-priority, name)
	topK   int
	// always are the positions (catalog order) of the always-listed tools:
	// listed beside tool_search for every session, callable unpromoted.
	always []int
	list   json.RawMessage // tools/list of a session that promoted nothing
}

// deferredTool is one listed tool as queries see it.
type deferredTool struct {
	name     string
	text     string // "name description", what queries match
	foldName string // casefold(name)
	foldText string // casefold(text)
	desc     string
	schema   json.RawMessage // inputSchema
	always   bool            // always listed: never deferred
}

// preferTool is a prefer-mode tool with keywords, for auto-promotion.
type preferTool struct {
	idx      int // position in the catalog's order
	priority int
	name     string
	keywords []string // folded, trimmed, non-empty
}

// buildSearch indexes the listed routes; topK is clamped to 1..5. The
// routes whose names an always glob matches stay listed.
func buildSearch[S any](routes []*Route[S], topK int, always []string) *searchIndex {
	ix := &searchIndex{tools: make([]deferredTool, len(routes)), topK: min(max(topK, 1), 5)}
	var listed []*Route[S]
	for i, r := range routes {
		ix.tools[i] = deferredOf(r)
		if p, ok := preferOf(r); ok {
			ix.prefer = append(ix.prefer, p)
		}
		if matchAny(always, r.Name) {
			ix.always = append(ix.always, i)
			ix.tools[i].always = true
			listed = append(listed, r)
		}
	}
	slices.SortStableFunc(ix.prefer, func(a, b preferTool) int {
		if c := cmp.Compare(b.priority, a.priority); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	ix.list = encodeTools(listed, toolSearchTool)
	return ix
}

// defers reports whether ix defers the listed tool at position i of the
// catalog's order: every tool but an always-listed one; none without
// tool_search (ix nil).
func (ix *searchIndex) defers(i int) bool {
	return ix != nil && i >= 0 && i < len(ix.tools) && !ix.tools[i].always
}

// deferredNames are the names of the deferred tools, in catalog order.
func (ix *searchIndex) deferredNames() []string {
	names := make([]string, 0, len(ix.tools)-len(ix.always))
	for _, t := range ix.tools {
		if !t.always {
			names = append(names, t.name)
		}
	}
	return names
}

// deferredOf reads a route's description and input schema (an object
// schema when it has none).
func deferredOf[S any](r *Route[S]) deferredTool {
	var t struct {
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	_ = json.Unmarshal(r.JSON, &t)
	if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	text := r.Name + " " + t.Description
	return deferredTool{name: r.Name, text: text, foldName: casefold(r.Name), foldText: casefold(text), desc: t.Description, schema: t.InputSchema}
}

// preferOf returns a prefer-mode route's folded keywords; ok is false when
// the route is not prefer-mode or has no non-blank keyword.
func preferOf[S any](r *Route[S]) (p preferTool, ok bool) {
	if r.routing.Mode != config.RoutingPrefer {
		return p, false
	}
	var kw []string
	for _, k := range r.routing.Keywords {
		if k = strings.TrimSpace(k); k != "" {
			kw = append(kw, casefold(k))
		}
	}
	return preferTool{idx: r.idx, priority: r.routing.Priority, name: r.Name, keywords: kw}, len(kw) > 0
}

// casefold approximates Python's str.casefold for substring matching.
func casefold(s string) string { return strings.ToLower(strings.ToUpper(s)) }

// match implements DeerFlow's three query forms and returns positions in
// the catalog's order.
func (c *Catalog[S]) match(query string) []int {
	q := strings.TrimSpace(query)
	if names, ok := strings.CutPrefix(q, "select:"); ok {
		return c.selectTools(names)
	}
	return c.search.match(q)
}

// selectTools is the select: form: the listed tools named in a
// comma-separated list, in catalog order, each once.
func (c *Catalog[S]) selectTools(names string) []int {
	var out []int
	for _, n := range strings.Split(names, ",") {
		if r := c.routes[strings.TrimSpace(n)]; r != nil && r.Deny == nil {
			out = append(out, r.idx)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// match is the keyword and +required forms of a trimmed query.
func (ix *searchIndex) match(q string) []int {
	switch {
	case q == "":
		return nil
	case strings.HasPrefix(q, "+"):
		return ix.requireName(q[1:])
	}
	return ix.keywordSearch(q)
}

// requireName is the "+required terms" form: tools whose name contains
// required, ranked by how often the remaining terms match, at most five.
func (ix *searchIndex) requireName(rest string) []int {
	rest = strings.TrimLeftFunc(rest, unicode.IsSpace)
	if rest == "" {
		return nil
	}
	required, terms := rest, ""
	if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
		required, terms = rest[:i], strings.TrimLeftFunc(rest[i:], unicode.IsSpace)
	}
	out := ix.nameContains(casefold(required))
	if terms != "" {
		ix.rank(out, newMatcher(terms))
	}
	return out[:min(len(out), maxSearchResults)]
}

// nameContains returns the tools whose folded name contains folded.
func (ix *searchIndex) nameContains(folded string) []int {
	var out []int
	for i := range ix.tools {
		if strings.Contains(ix.tools[i].foldName, folded) {
			out = append(out, i)
		}
	}
	return out
}

// rank sorts tools by how often m matches their text, most first; ties keep
// catalog order.
func (ix *searchIndex) rank(tools []int, m matcher) {
	score := make(map[int]int, len(tools))
	for _, i := range tools {
		score[i] = m.count(ix.tools[i].text, ix.tools[i].foldText)
	}
	slices.SortStableFunc(tools, func(a, b int) int { return cmp.Compare(score[b], score[a]) })
}

// keywordSearch is the plain form: a name match scores 2, a
// description-only match 1; ties keep catalog order. Name matches come
// first, so the scan can stop at five of them.
func (ix *searchIndex) keywordSearch(q string) []int {
	m := newMatcher(q)
	var byName, byDesc []int
	for i := range ix.tools {
		t := &ix.tools[i]
		if !m.match(t.text, t.foldText) {
			continue
		}
		if m.match(t.name, t.foldName) {
			if byName = append(byName, i); len(byName) == maxSearchResults {
				break
			}
		} else if len(byDesc) < maxSearchResults {
			byDesc = append(byDesc, i)
		}
	}
	out := append(byName, byDesc...)
	return out[:min(len(out), maxSearchResults)]
}

// autoPromote returns the prefer-mode tools whose keywords occur in the
// query (case-insensitive substring, as DeerFlow matches the user's
// message), at most topK, by (-priority, name).
func (ix *searchIndex) autoPromote(query string) []int {
	hay := casefold(query)
	var out []int
	for _, p := range ix.prefer {
		if p.occursIn(hay) {
			out = append(out, p.idx)
		}
		if len(out) == ix.topK {
			break
		}
	}
	return out
}

// occursIn reports whether one of p's keywords occurs in folded text.
func (p *preferTool) occursIn(hay string) bool {
	for _, k := range p.keywords {
		if strings.Contains(hay, k) {
			return true
		}
	}
	return false
}

// openAIFunction is DeerFlow's tool_search result item.
type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// ToolSearch answers a tool_search call with arguments args: the tool
// result, and the names of the tools it returned, which the caller
// promotes for its session (none when the call failed or matched nothing).
// c must be Searching.
func (c *Catalog[S]) ToolSearch(args json.RawMessage) (result json.RawMessage, promote []string) {
	var p struct {
		Query *string `json:"query"`
	}
	if len(args) == 0 || json.Unmarshal(args, &p) != nil || p.Query == nil {
		return toolText(`Error: tool_search needs a "query" string argument.`, true), nil
	}
	fns, names := c.found(*p.Query)
	if len(fns) == 0 {
		return toolText("No tools found matching: "+*p.Query, false), nil
	}
	text, err := encodeFunctions(fns)
	if err != nil {
		return toolText("Error: tool_search could not encode the schemas: "+err.Error(), true), nil
	}
	return toolText(text, false), names
}

// found returns the tools a query matches, then those it auto-promotes
// (not for select:), each once, with their names.
func (c *Catalog[S]) found(query string) ([]openAIFunction, []string) {
	hits := c.match(query)
	if !strings.HasPrefix(strings.TrimSpace(query), "select:") {
		hits = append(hits, c.search.autoPromote(query)...)
	}
	seen := make(map[int]bool, len(hits))
	fns := make([]openAIFunction, 0, len(hits))
	names := make([]string, 0, len(hits))
	for _, i := range hits {
		if seen[i] {
			continue
		}
		seen[i] = true
		t := &c.search.tools[i]
		names = append(names, t.name)
		fns = append(fns, openAIFunction{Name: t.name, Description: t.desc, Parameters: t.schema})
	}
	return fns, names
}

// encodeFunctions renders the result items as DeerFlow does:
// json.dumps(..., indent=2, ensure_ascii=False).
func encodeFunctions(fns []openAIFunction) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fns); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// DeferredError is DeerFlow's answer to a call of an unpromoted deferred
// tool.
func DeferredError(name string) json.RawMessage {
	return toolText("Error: Tool '"+name+"' is deferred and has not been promoted yet. Call tool_search first to expose and promote this tool's schema, then retry.", true)
}

// toolText returns a CallToolResult with one text block.
func toolText(text string, isError bool) json.RawMessage {
	b := make([]byte, 0, len(text)+48)
	b = append(b, `{"content":[{"type":"text","text":`...)
	b = append(b, mustJSON(text)...)
	if isError {
		return append(b, `}],"isError":true}`...)
	}
	return append(b, `}]}`...)
}
