package proxy

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/upstream"
)

// toolNameRE is DeerFlow's tool-name charset plus the 128-character limit
// that model providers and the MCP spec put on function names.
var toolNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

// route is one visible tool and where calls to it go.
type route struct {
	name   string // visible name
	raw    string // upstream tool name
	server *backend
	json   json.RawMessage // the upstream's tool object with the visible name
}

// catalog is the aggregated tool list of one runtime. It is immutable once
// built; a change upstream builds a new one.
type catalog struct {
	routes   map[string]*route
	order    []*route
	listJSON json.RawMessage // cached tools/list result
	res      resourceIndex
}

// buildCatalog applies naming, the charset rule and first-wins collisions to
// the backends' tool lists, in config order then each server's list order.
func buildCatalog(backends []*backend, log hclog.Logger) *catalog {
	c := &catalog{routes: make(map[string]*route)}
	for _, b := range backends {
		for _, t := range b.up.Tools() {
			name := t.Name
			if b.prefix {
				name = b.name + "_" + t.Name
			}
			if !toolNameRE.MatchString(name) {
				log.Warn("dropping tool with an invalid name: names must match ^[A-Za-z0-9_-]{1,128}$",
					"server", b.name, "tool", fmt.Sprintf("%.200q", name))
				continue
			}
			if prev, dup := c.routes[name]; dup {
				log.Warn("duplicate tool name; keeping the first", "tool", name,
					"kept_server", prev.server.name, "skipped_server", b.name)
				continue
			}
			r := &route{name: name, raw: t.Name, server: b, json: renameTool(t, name)}
			c.routes[name] = r
			c.order = append(c.order, r)
		}
	}
	c.listJSON = c.encodeList(c.order)
	c.res = buildResources(backends, log)
	return c
}

// renameTool returns the tool object with "name" set to the visible name and
// every other member byte-for-byte as the upstream sent it.
func renameTool(t upstream.Tool, name string) json.RawMessage {
	if name == t.Name {
		return t.Raw
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(t.Raw, &obj); err != nil {
		return t.Raw
	}
	obj["name"], _ = json.Marshal(name)
	b, err := json.Marshal(obj)
	if err != nil {
		return t.Raw
	}
	return b
}

func (c *catalog) encodeList(routes []*route) json.RawMessage {
	n := 16
	for _, r := range routes {
		n += len(r.json) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"tools":[`...)
	for i, r := range routes {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, r.json...)
	}
	return append(b, "]}"...)
}

// sameTools reports whether two catalogs list the same tools.
func sameTools(a, b *catalog) bool {
	if a == nil || b == nil {
		return a == b
	}
	return string(a.listJSON) == string(b.listJSON)
}

func sameRaw(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if string(a[i]) != string(b[i]) {
			return false
		}
	}
	return true
}

// samePrompts and sameResources compare the other aggregated lists.
func samePrompts(a, b *catalog) bool { return sameRaw(a.res.promptList, b.res.promptList) }

func sameResources(a, b *catalog) bool {
	return sameRaw(a.res.resList, b.res.resList) && sameRaw(a.res.tmplList, b.res.tmplList)
}
