package proxy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hashicorp/go-hclog"
	"github.com/yosida95/uritemplate/v3"

	"github.com/mcp-mux/mcp-mux/upstream"
)

// promptRoute is one visible prompt and the server that owns it.
type promptRoute struct {
	name   string
	raw    string
	server *backend
	json   json.RawMessage
}

// templateRoute is one resource template and the server that owns it.
type templateRoute struct {
	tmpl   *uritemplate.Template
	server *backend
}

// resourceIndex holds the aggregated prompts, resources and templates.
type resourceIndex struct {
	prompts    map[string]*promptRoute
	promptList []json.RawMessage
	resources  map[string]*backend // URI → owner, first wins
	resList    []json.RawMessage
	templates  []templateRoute
	tmplList   []json.RawMessage
	withRes    []*backend // servers that have resources at all
}

// buildResources aggregates prompts (named like tools) and resources (URIs
// kept as they are, first server wins on a duplicate URI).
func buildResources(backends []*backend, log hclog.Logger) resourceIndex {
	ix := resourceIndex{prompts: map[string]*promptRoute{}, resources: map[string]*backend{}}
	for _, b := range backends {
		l := b.up.Lists()
		for _, p := range l.Prompts {
			name := p.Key
			if b.prefix {
				name = b.name + "_" + p.Key
			}
			if !toolNameRE.MatchString(name) {
				log.Warn("dropping prompt with an invalid name", "server", b.name, "prompt", fmt.Sprintf("%.200q", name))
				continue
			}
			if prev, dup := ix.prompts[name]; dup {
				log.Warn("duplicate prompt name; keeping the first", "prompt", name, "kept_server", prev.server.name, "skipped_server", b.name)
				continue
			}
			r := &promptRoute{name: name, raw: p.Key, server: b, json: renameTool(upstream.Tool{Name: p.Key, Raw: p.Raw}, name)}
			ix.prompts[name] = r
			ix.promptList = append(ix.promptList, r.json)
		}
		if len(l.Resources) > 0 || len(l.Templates) > 0 || (l.Capabilities != nil && l.Capabilities.Resources != nil) {
			ix.withRes = append(ix.withRes, b)
		}
		for _, r := range l.Resources {
			if prev, dup := ix.resources[r.Key]; dup {
				log.Warn("duplicate resource URI; keeping the first", "uri", r.Key, "kept_server", prev.name, "skipped_server", b.name)
				continue
			}
			ix.resources[r.Key] = b
			ix.resList = append(ix.resList, r.Raw)
		}
		for _, t := range l.Templates {
			tmpl, err := uritemplate.New(t.Key)
			if err != nil {
				log.Warn("ignoring resource template that does not parse", "server", b.name, "err", err)
				continue
			}
			ix.templates = append(ix.templates, templateRoute{tmpl: tmpl, server: b})
			ix.tmplList = append(ix.tmplList, t.Raw)
		}
	}
	return ix
}

// resourceOwner finds the server for a resource URI: an exact listed URI,
// then the first matching template, then the only server with resources.
// A URI longer than maxResourceURI matches no template: matching costs
// about 2 µs a byte per template.
func (ix *resourceIndex) resourceOwner(uri string) *backend {
	if b := ix.resources[uri]; b != nil {
		return b
	}
	for _, t := range ix.templates {
		if len(uri) <= maxResourceURI && t.tmpl.Match(uri) != nil {
			return t.server
		}
	}
	if len(ix.withRes) == 1 {
		return ix.withRes[0]
	}
	return nil
}

// page returns one page of items as a list result under field, with a
// nextCursor when more remain. Cursors are opaque offsets.
func page(items []json.RawMessage, field, cursor string, size int) (json.RawMessage, error) {
	start := 0
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil {
			return nil, errBadCursor
		}
		n, err := strconv.Atoi(string(b))
		if err != nil || n < 0 || n > len(items) {
			return nil, errBadCursor
		}
		start = n
	}
	end := len(items)
	if size > 0 && start+size < end {
		end = start + size
	}
	out := make([]byte, 0, 64)
	out = append(out, '{', '"')
	out = append(out, field...)
	out = append(out, `":[`...)
	for i, it := range items[start:end] {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, it...)
	}
	out = append(out, ']')
	if end < len(items) {
		out = append(out, `,"nextCursor":"`...)
		out = append(out, base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(end)))...)
		out = append(out, '"')
	}
	return append(out, '}'), nil
}
