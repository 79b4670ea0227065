package catalog

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// MCP Apps (SEP-1865, the io.modelcontextprotocol/ui extension).
//
// A tool names its UI in _meta.ui.resourceUri (or the older
// _meta["ui/resourceUri"]), a ui:// URI its server serves; the host reads
// that resource and renders it, and the app calls tools through the host
// by the names its own server gave them. Two servers may both name their
// UI ui://dashboard, so the catalog gives every ui:// URI a server segment
// and keeps the scheme: ui://dashboard of server a is ui://a/dashboard, and
// ui://host/path is ui://a/host/path (AppURI). The segment is the server's
// configured name, whether or not its tools are prefixed (a URI must be
// unique across servers), and it routes a read back to that server with
// its own URI (ServerURI): never first-wins, never the only server with
// resources. A server whose name is not a valid tool-name segment keeps its
// ui:// URIs as they are.
//
// Where the URIs appear downstream, the catalog rewrites them at build
// time (tool _meta, resources/list, resources/templates/list) and the
// call path's apps stage in results (the contents of a resources/read, the
// resource_link and embedded resource blocks of a tool result,
// AppResult). A view lists a tool only with its server, and the link
// names that server, so every link a view lists is one its callers may
// read.
//
// An app's tools/call names its server's own tool (ResolveRaw): a raw name
// of an app server (one that declares the extension or lists a tool with a
// UI) reaches that tool when exactly one app server in the caller's view
// has it; when several do, the call's _meta["mux/uiResource"] — the ui://
// URI of the app, as the mux listed it — picks the server. The resolved
// call is the prefixed name's call from then on: guardrails, profiles,
// tool_search and policy see the visible name.

// UIExtension is the MCP Apps extension's capability key.
const UIExtension = upstream.UIExtension

// OriginMetaKey is the tools/call _meta key a host may set to the app's
// ui:// URI (as mcp-mux listed it), naming the server a raw tool name
// means.
const OriginMetaKey = "mux/uiResource"

// uiScheme is the scheme of an MCP App's resource, exactly as the
// extension writes it.
const uiScheme = "ui://"

// legacyUIKey is the older flat _meta key of a tool's UI.
const legacyUIKey = "ui/resourceUri"

// AppURI is uri as mcp-mux lists it for server: a ui:// URI with the
// server's segment, ui://<server>/<rest>; any other URI unchanged.
func AppURI(server, uri string) string {
	if !strings.HasPrefix(uri, uiScheme) || !toolNameRE.MatchString(server) {
		return uri
	}
	return uiScheme + server + "/" + uri[len(uiScheme):]
}

// ServerURI splits a ui:// URI mcp-mux listed into the server segment and
// the server's own URI; ok is false for any other URI.
func ServerURI(uri string) (server, own string, ok bool) {
	rest, found := strings.CutPrefix(uri, uiScheme)
	if !found {
		return "", "", false
	}
	server, tail, found := strings.Cut(rest, "/")
	if !found || !toolNameRE.MatchString(server) {
		return "", "", false
	}
	return server, uiScheme + tail, true
}

// appIndex is what a catalog knows of its servers for MCP Apps.
type appIndex[S any] struct {
	servers map[string]S           // every source by name: a ui:// URI's segment routes by it
	raw     map[string][]*Route[S] // an app server's own tool name → its named routes
	apps    map[string]bool        // the app servers by name
}

// buildApps indexes the sources' names and the app servers' own tool
// names among a catalog's named routes.
func buildApps[S any](sources []Source[S], routes map[string]*Route[S]) appIndex[S] {
	ix := appIndex[S]{servers: make(map[string]S, len(sources))}
	for i := range sources {
		src := &sources[i]
		ix.servers[src.Name] = src.Server
		if isAppServer(&src.Lists) {
			if ix.apps == nil {
				ix.apps = map[string]bool{}
			}
			ix.apps[src.Name] = true
		}
	}
	for _, r := range routes {
		if ix.apps[r.source] {
			if ix.raw == nil {
				ix.raw = map[string][]*Route[S]{}
			}
			ix.raw[r.Raw] = append(ix.raw[r.Raw], r)
		}
	}
	return ix
}

// isAppServer reports whether a server serves MCP Apps: it declares the
// extension or lists a tool with a UI.
func isAppServer(l *upstream.Lists) bool {
	if l.Capabilities != nil {
		if _, ok := l.Capabilities.Extensions[UIExtension]; ok {
			return true
		}
	}
	for _, t := range l.Tools {
		if uiLinkOf(t.Raw) != "" {
			return true
		}
	}
	return false
}

// uiLinkOf returns a tool object's ui:// UI link, or "".
func uiLinkOf(tool json.RawMessage) string {
	if !bytes.Contains(tool, []byte("ui:")) {
		return ""
	}
	var t struct {
		Meta struct {
			UI struct {
				ResourceURI string `json:"resourceUri"`
			} `json:"ui"`
			Legacy string `json:"ui/resourceUri"`
		} `json:"_meta"`
	}
	if json.Unmarshal(tool, &t) != nil {
		return ""
	}
	for _, u := range []string{t.Meta.UI.ResourceURI, t.Meta.Legacy} {
		if strings.HasPrefix(u, uiScheme) {
			return u
		}
	}
	return ""
}

// Apps reports whether some server of this catalog serves MCP Apps.
func (c *Catalog[S]) Apps() bool { return len(c.apps.apps) > 0 }

// owner is the server a ui:// URI's segment names in the catalog; isUI
// reports whether uri is a ui:// URI at all (which then never routes to
// the only server with resources).
func (ix *appIndex[S]) owner(uri string) (s S, ok, isUI bool) {
	if !strings.HasPrefix(uri, uiScheme) {
		return s, false, false
	}
	server, _, parsed := ServerURI(uri)
	if !parsed {
		return s, false, true
	}
	s, ok = ix.servers[server]
	return s, ok, true
}

// ResolveRaw returns the route an app's tools/call of name means in this
// view when name is no visible name: the one app server's tool of that
// own name, or the one of origin's server (a ui:// URI as listed) among
// several. With several and no origin naming one of them, the route is nil
// and the candidates are their visible names.
func (c *Catalog[S]) ResolveRaw(name, origin string) (r *Route[S], candidates []string) {
	rs := c.apps.raw[name]
	switch len(rs) {
	case 0:
		return nil, nil
	case 1:
		return rs[0], nil
	}
	if server, _, ok := ServerURI(origin); ok {
		for _, r := range rs {
			if r.source == server {
				return r, nil
			}
		}
	}
	for _, r := range rs {
		candidates = append(candidates, r.Name)
	}
	slices.Sort(candidates)
	return nil, candidates
}
