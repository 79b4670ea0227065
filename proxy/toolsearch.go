package proxy

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/config"
)

// tool_search: deferred tool schemas (DeerFlow's tool_search, §3.2).
//
// With tool_search.enabled every listed tool is deferred. A session's
// tools/list shows the tool_search tool plus the tools that session has
// promoted; the instructions list every deferred name. tool_search(query)
// returns the matched tools' schemas (DeerFlow's OpenAI-function shape, as
// JSON text), promotes them for the calling session only and sends that
// session notifications/tools/list_changed. Prefer-mode tools whose keywords
// occur in a search query are promoted and returned too, up to
// auto_promote_top_k (not for select:, which names its tools exactly).
// Calling a deferred tool the session has not promoted is a tool error with
// DeerFlow's text, as in DeerFlow's DeferredToolFilterMiddleware. Promotions live as long as the session and
// survive catalog changes for the tools that still exist.

const (
	toolSearchName   = "tool_search"
	maxSearchResults = 5 // DeerFlow's MAX_RESULTS; select: is not capped
)

// toolSearchTool is the tool object of tool_search.
var toolSearchTool = json.RawMessage(`{"name":"tool_search","description":` + mustJSON(toolSearchDescription) +
	`,"inputSchema":{"type":"object","properties":{"query":{"type":"string","description":"What to search for; see the query forms in the description."}},"required":["query"]}}`)

const toolSearchDescription = `Fetches full schema definitions for deferred tools so they can be called.

Deferred tools appear by name in <available-deferred-tools> in the server instructions. Until fetched, only the name is known. This tool matches a query against the deferred tools and returns the matched tools' complete schemas; once returned, a tool is listed in tools/list and becomes callable.

Query forms:
  - "select:Read,Edit" -- fetch these exact tools by name
  - "notebook jupyter" -- keyword search (a case-insensitive regular expression over name and description), up to 5 best matches
  - "+slack send" -- require "slack" in the name, rank by remaining terms`

func mustJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// searchIndex is the deferred half of one catalog. Immutable.
type searchIndex struct {
	tools  []deferredTool    // catalog order
	routes map[string]*route // the catalog's routes, for select:
	prefer []preferTool      // prefer-mode tools with keywords, by (-priority, name)
	topK   int
	list   json.RawMessage // tools/list of a session that promoted nothing
}

type deferredTool struct {
	r        *route
	text     string // "name description", what queries match
	foldName string // casefold(name)
	foldText string // casefold(text)
	desc     string
	schema   json.RawMessage // inputSchema
}

type preferTool struct {
	r        *route
	keywords []string // folded, trimmed, non-empty
}

func buildSearch(routes []*route, all map[string]*route, topK int) *searchIndex {
	ix := &searchIndex{tools: make([]deferredTool, len(routes)), routes: all, topK: min(max(topK, 1), 5)}
	for i, r := range routes {
		var t struct {
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		_ = json.Unmarshal(r.json, &t)
		if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
			t.InputSchema = json.RawMessage(`{"type":"object"}`)
		}
		text := r.name + " " + t.Description
		ix.tools[i] = deferredTool{r: r, text: text, foldName: casefold(r.name), foldText: casefold(text), desc: t.Description, schema: t.InputSchema}
		if r.routing.Mode != config.RoutingPrefer {
			continue
		}
		var kw []string
		for _, k := range r.routing.Keywords {
			if k = strings.TrimSpace(k); k != "" {
				kw = append(kw, casefold(k))
			}
		}
		if len(kw) > 0 {
			ix.prefer = append(ix.prefer, preferTool{r: r, keywords: kw})
		}
	}
	slices.SortStableFunc(ix.prefer, func(a, b preferTool) int {
		if c := cmp.Compare(b.r.routing.Priority, a.r.routing.Priority); c != 0 {
			return c
		}
		return strings.Compare(a.r.name, b.r.name)
	})
	ix.list = encodeTools(nil, toolSearchTool)
	return ix
}

// casefold approximates Python's str.casefold for substring matching.
func casefold(s string) string { return strings.ToLower(strings.ToUpper(s)) }

// matcher is a query compiled as a case-insensitive regular expression, or
// as a literal when it has no metacharacters or is not valid RE2 syntax.
// Literals are matched by substring search on casefolded text, which is
// what the regular expression would do, many times faster. RE2 runs in
// linear time, so no query can stall the server.
type matcher struct {
	re *regexp.Regexp
	// lit is the casefolded literal when re is nil; with re, an ASCII
	// literal every match contains (or ""), checked first.
	lit string
}

func newMatcher(q string) matcher {
	if regexp.QuoteMeta(q) != q {
		if re, err := regexp.Compile("(?i)" + q); err == nil {
			m := matcher{re: re}
			if tree, err := syntax.Parse("(?i)"+q, syntax.Perl); err == nil {
				m.lit = strings.ToLower(requiredLiteral(tree.Simplify()))
			}
			return m
		}
	}
	return matcher{lit: casefold(q)}
}

// requiredLiteral returns the longest ASCII literal that every match of re
// contains, or "". Containment in casefolded text is then a sound
// prefilter: whatever matches the literal case-insensitively folds to it.
func requiredLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r >= utf8.RuneSelf {
				return ""
			}
		}
		return string(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best := ""
		for _, sub := range re.Sub {
			if l := requiredLiteral(sub); len(l) > len(best) {
				best = l
			}
		}
		return best
	}
	return ""
}

func (m matcher) match(s, folded string) bool {
	if m.re == nil {
		return strings.Contains(folded, m.lit)
	}
	if m.lit != "" && !strings.Contains(folded, m.lit) {
		return false
	}
	return m.re.MatchString(s)
}

func (m matcher) count(s, folded string) int {
	if m.re == nil {
		return strings.Count(folded, m.lit)
	}
	if m.lit != "" && !strings.Contains(folded, m.lit) {
		return 0
	}
	return len(m.re.FindAllStringIndex(s, -1))
}

// search implements DeerFlow's three query forms and returns indexes into
// ix.tools.
func (ix *searchIndex) search(query string) []int {
	q := strings.TrimSpace(query)
	switch {
	case q == "":
		return nil
	case strings.HasPrefix(q, "select:"):
		var out []int
		for _, n := range strings.Split(q[len("select:"):], ",") {
			if r := ix.routes[strings.TrimSpace(n)]; r != nil && r.deny == nil {
				out = append(out, r.idx)
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	case strings.HasPrefix(q, "+"):
		rest := strings.TrimLeftFunc(q[1:], unicode.IsSpace)
		if rest == "" {
			return nil
		}
		required, terms := rest, ""
		if i := strings.IndexFunc(rest, unicode.IsSpace); i >= 0 {
			required, terms = rest[:i], strings.TrimLeftFunc(rest[i:], unicode.IsSpace)
		}
		required = casefold(required)
		var out []int
		for i := range ix.tools {
			if strings.Contains(ix.tools[i].foldName, required) {
				out = append(out, i)
			}
		}
		if terms != "" {
			m := newMatcher(terms)
			score := make(map[int]int, len(out))
			for _, i := range out {
				score[i] = m.count(ix.tools[i].text, ix.tools[i].foldText)
			}
			slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(score[b], score[a]) })
		}
		return out[:min(len(out), maxSearchResults)]
	}
	// A name match scores 2, a description-only match 1; ties keep catalog
	// order. Name matches come first, so the scan can stop at five of them.
	m := newMatcher(q)
	var byName, byDesc []int
	for i := range ix.tools {
		t := &ix.tools[i]
		if !m.match(t.text, t.foldText) {
			continue
		}
		if m.match(t.r.name, t.foldName) {
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
func (ix *searchIndex) autoPromote(query string) []*route {
	hay := casefold(query)
	var out []*route
	for _, p := range ix.prefer {
		for _, k := range p.keywords {
			if strings.Contains(hay, k) {
				out = append(out, p.r)
				break
			}
		}
		if len(out) == ix.topK {
			break
		}
	}
	return out
}

// openAIFunction is DeerFlow's tool_search result item.
type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// toolSearch answers a tool_search call for st.
func (s *Server) toolSearch(ctx context.Context, st *session, k sink, cat *catalog, args json.RawMessage) json.RawMessage {
	var p struct {
		Query *string `json:"query"`
	}
	if len(args) == 0 || json.Unmarshal(args, &p) != nil || p.Query == nil {
		return toolText(`Error: tool_search needs a "query" string argument.`, true)
	}
	ix := cat.search
	hits := ix.search(*p.Query)
	seen := make(map[string]bool, len(hits))
	fns := make([]openAIFunction, 0, len(hits))
	names := make([]string, 0, len(hits))
	add := func(t *deferredTool) {
		if seen[t.r.name] {
			return
		}
		seen[t.r.name] = true
		names = append(names, t.r.name)
		fns = append(fns, openAIFunction{Name: t.r.name, Description: t.desc, Parameters: t.schema})
	}
	for _, i := range hits {
		add(&ix.tools[i])
	}
	if !strings.HasPrefix(strings.TrimSpace(*p.Query), "select:") {
		for _, r := range ix.autoPromote(*p.Query) {
			add(&ix.tools[r.idx])
		}
	}
	if len(fns) == 0 {
		return toolText("No tools found matching: "+*p.Query, false)
	}
	// json.dumps(..., indent=2, ensure_ascii=False), as DeerFlow renders it.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(fns); err != nil {
		return toolText("Error: tool_search could not encode the schemas: "+err.Error(), true)
	}
	if !st.modern && st.promo.add(cat, names) {
		notifyToolsChanged(ctx, s, st, k)
	}
	return toolText(strings.TrimSuffix(buf.String(), "\n"), false)
}

// notifyToolsChanged tells only the calling session that its tools/list
// changed, on the call's own stream, before the result.
func notifyToolsChanged(ctx context.Context, s *Server, st *session, k sink) {
	if f, ok := k.(*fastSink); ok {
		f.notify("notifications/tools/list_changed", json.RawMessage(`{}`))
		return
	}
	s.notify(ctx, st.ss, "notifications/tools/list_changed", nil)
}

// deferredError is DeerFlow's answer to a call of an unpromoted deferred tool.
func deferredError(name string) json.RawMessage {
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

// promotions are the deferred tools one session promoted.
type promotions struct {
	mu    sync.Mutex
	names map[string]bool
	cat   *catalog        // the catalog names were last checked against
	list  json.RawMessage // tools/list for cat, built on demand
}

// syncLocked drops promotions of tools cat no longer lists. p.mu is held.
func (p *promotions) syncLocked(cat *catalog) {
	if p.cat == cat {
		return
	}
	for n := range p.names {
		if r := cat.routes[n]; r == nil || r.deny != nil {
			delete(p.names, n)
		}
	}
	p.cat, p.list = cat, nil
}

func (p *promotions) has(cat *catalog, name string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked(cat)
	return p.names[name]
}

// add promotes names and reports whether any was new.
func (p *promotions) add(cat *catalog, names []string) bool {
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

// listFor returns the tools/list result the session had under cat (a
// catalog it may since have moved on from), without changing its state.
func (p *promotions) listFor(cat *catalog) json.RawMessage {
	if cat.search == nil {
		return cat.listJSON
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cat == cat && p.list != nil {
		return p.list
	}
	var routes []*route
	for n := range p.names {
		if r := cat.routes[n]; r != nil && r.deny == nil {
			routes = append(routes, r)
		}
	}
	if len(routes) == 0 {
		return cat.search.list
	}
	slices.SortFunc(routes, func(a, b *route) int { return cmp.Compare(a.idx, b.idx) })
	return encodeTools(routes, toolSearchTool)
}

// toolsList returns the session's tools/list result under tool_search: its
// promoted tools in catalog order, then tool_search.
func (p *promotions) toolsList(cat *catalog) json.RawMessage {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.syncLocked(cat)
	if len(p.names) == 0 {
		return cat.search.list
	}
	if p.list == nil {
		routes := make([]*route, 0, len(p.names))
		for n := range p.names {
			routes = append(routes, cat.routes[n])
		}
		slices.SortFunc(routes, func(a, b *route) int { return cmp.Compare(a.idx, b.idx) })
		p.list = encodeTools(routes, toolSearchTool)
	}
	return p.list
}

// toolsList is the tools/list result for st.
func (s *Server) toolsList(st *session, cat *catalog) json.RawMessage {
	if cat.search == nil {
		return cat.listJSON
	}
	return st.promo.toolsList(cat)
}
