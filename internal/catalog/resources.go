package catalog

import (
	"github.com/mcp-mux/mcp-mux/internal/bounds"

	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-mux/mcp-mux/internal/subscriptions"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Prompts are named like tools (prefix, charset, first wins); resources
// keep their URIs (first server wins on a duplicate URI); resource
// templates are listed from every server and route by first match.

// MaxResourceURI bounds the bytes of a resource URI that is matched against
// the templates (matching costs about 2 µs a byte per template); a longer
// URI routes only by an exact listed URI. It is the bound on a subscribed
// URI.
const MaxResourceURI = subscriptions.MaxURI

// PromptRoute is one visible prompt and the server that owns it.
type PromptRoute[S any] struct {
	Name   string // visible name
	Raw    string // the upstream's prompt name
	Server S
	JSON   json.RawMessage // the prompt object with the visible name
	source string          // the owning server's name, for logs
}

// templateRoute is one resource template and the server that owns it.
type templateRoute[S any] struct {
	tmpl   *uritemplate.Template
	server S
	name   string // the server's name (skills.go)
}

// resourceIndex holds the aggregated prompts, resources and templates.
type resourceIndex[S any] struct {
	prompts    map[string]*PromptRoute[S]
	promptList []json.RawMessage
	resources  map[string]resourceOwner[S] // URI → owner, first wins
	resList    []json.RawMessage
	templates  []templateRoute[S]
	tmplList   []json.RawMessage
	withRes    []S // servers that have resources at all
	dups       []duplicate
}

// resourceOwner is the server that listed a resource URI.
type resourceOwner[S any] struct {
	server S
	name   string // for logs
}

// buildResources aggregates the sources' prompts, resources and templates.
func buildResources[S any](sources []Source[S], skills *Skills[S], log hclog.Logger) resourceIndex[S] {
	ix := resourceIndex[S]{prompts: map[string]*PromptRoute[S]{}, resources: map[string]resourceOwner[S]{}}
	for i := range sources {
		src := &sources[i]
		ix.addPrompts(src, log)
		if hasResources(&src.Lists) {
			ix.withRes = append(ix.withRes, src.Server)
		}
		ix.addResources(src, skills)
		ix.addTemplates(src, log)
	}
	return ix
}

// hasResources reports whether a server serves resources at all.
func hasResources(l *upstream.Lists) bool {
	return len(l.Resources) > 0 || len(l.Templates) > 0 || (l.Capabilities != nil && l.Capabilities.Resources != nil)
}

// addPrompts names and lists one source's prompts.
func (ix *resourceIndex[S]) addPrompts(src *Source[S], log hclog.Logger) {
	for _, p := range src.Lists.Prompts {
		name := visibleName(src, p.Key)
		if !toolNameRE.MatchString(name) {
			log.Warn("dropping prompt with an invalid name", "server", src.Name, "prompt", fmt.Sprintf("%.200q", name))
			continue
		}
		if prev, dup := ix.prompts[name]; dup {
			ix.dups = append(ix.dups, duplicate{what: "prompt name", field: "prompt", key: name, kept: prev.source, skipped: src.Name})
			continue
		}
		r := &PromptRoute[S]{Name: name, Raw: p.Key, Server: src.Server, JSON: renameTool(upstream.Tool{Name: p.Key, Raw: p.Raw}, name), source: src.Name}
		ix.prompts[name] = r
		ix.promptList = append(ix.promptList, r.JSON)
	}
}

// addResources lists one source's resources whose URIs are not taken.
func (ix *resourceIndex[S]) addResources(src *Source[S], skills *Skills[S]) {
	for _, r := range src.Lists.Resources {
		r = exposeResource(src, skills, r)                 // skills.go: a prefixed skill server's skill:// URIs
		key, raw := appItem(src.Name, r.Key, r.Raw, "uri") // appuris.go: a ui:// URI as listed
		if prev, dup := ix.resources[key]; dup {
			ix.dups = append(ix.dups, duplicate{what: "resource URI", field: "uri", key: key, kept: prev.name, skipped: src.Name})
			continue
		}
		ix.resources[key] = resourceOwner[S]{server: src.Server, name: src.Name}
		ix.resList = append(ix.resList, raw)
	}
}

// addTemplates lists one source's resource templates that parse.
func (ix *resourceIndex[S]) addTemplates(src *Source[S], log hclog.Logger) {
	for _, t := range src.Lists.Templates {
		key, raw := appItem(src.Name, t.Key, t.Raw, "uriTemplate") // appuris.go: a ui:// template as listed
		tmpl, err := uritemplate.New(key)
		if err != nil {
			log.Warn("ignoring resource template that does not parse", "server", src.Name, "err", err)
			continue
		}
		ix.templates = append(ix.templates, templateRoute[S]{tmpl: tmpl, server: src.Server, name: src.Name})
		ix.tmplList = append(ix.tmplList, raw)
	}
}

// Prompt returns the route of a visible prompt name, or nil.
func (c *Catalog[S]) Prompt(name string) *PromptRoute[S] { return c.res.prompts[name] }

// Prompts is the prompts/list items.
func (c *Catalog[S]) Prompts() []json.RawMessage { return c.res.promptList }

// Resources is the resources/list items.
func (c *Catalog[S]) Resources() []json.RawMessage { return c.res.resList }

// Templates is the resources/templates/list items.
func (c *Catalog[S]) Templates() []json.RawMessage { return c.res.tmplList }

// ResourceOwner finds the server for a resource URI: a listed ui:// URI's
// server segment (apps.go), an exact listed URI, then the first matching
// template, then (not for ui://) the only server with resources; the zero
// S when there is none. A URI longer than MaxResourceURI matches no
// template.
func (c *Catalog[S]) ResourceOwner(uri string) S {
	app, ok, isUI := c.apps.owner(uri) // apps.go
	if ok {
		return app
	}
	ix := &c.res
	if o, ok := ix.resources[uri]; ok {
		return o.server
	}
	if sv, _, ok := c.Skills().Owner(uri); ok { // skills.go
		return sv.Server
	}
	if len(uri) <= MaxResourceURI {
		for _, t := range ix.templates {
			if t.tmpl.Match(uri) != nil {
				return t.server
			}
		}
	}
	if len(ix.withRes) == 1 && !isUI {
		return ix.withRes[0]
	}
	var none S
	return none
}

// ToolLabel is Label of a tools/call of name, whose route r the caller
// looked up already (nil: none).
func (c *Catalog[S]) ToolLabel(name string, r *Route[S]) string {
	return bounds.Label(name, r != nil || (c.Searching() && name == ToolSearchName))
}

// Label is what a tools/call or prompts/get of name is called in metrics
// and spans: the name when this view has it, else bounds.Unknown, so the
// names callers invent make one series, not one each.
func (c *Catalog[S]) Label(method, name string) string {
	switch method {
	case "tools/call":
		return c.ToolLabel(name, c.Lookup(name))
	case "prompts/get":
		return bounds.Label(name, c.Prompt(name) != nil)
	}
	return name
}
