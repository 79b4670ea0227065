package catalog

import (
	"bytes"
	"encoding/json"
	"strings"
)

// The JSON rewrites of MCP Apps' ui:// URIs (apps.go): each one decodes
// only the objects on the way to a URI, re-encodes only what it changed,
// and returns its input unchanged when there is no ui:// URI to change or
// the JSON is not what it expects.

// hasUI is the cheap test before any decoding.
func hasUI(raw []byte) bool { return bytes.Contains(raw, []byte("ui:")) }

// rewriteString rewrites the JSON string at obj[key] with f; it reports
// whether it changed.
func rewriteString(obj map[string]json.RawMessage, key string, f func(string) string) bool {
	v, ok := obj[key]
	if !ok {
		return false
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return false
	}
	n := f(s)
	if n == s {
		return false
	}
	obj[key], _ = json.Marshal(n)
	return true
}

// rewriteObject applies edit to the JSON object raw and returns it
// re-encoded when edit reports a change, else raw.
func rewriteObject(raw json.RawMessage, edit func(obj map[string]json.RawMessage) bool) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil || !edit(obj) {
		return raw
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return b
}

// nested rewrites the object at obj[key] with edit; it reports whether it
// changed.
func nested(obj map[string]json.RawMessage, key string, edit func(map[string]json.RawMessage) bool) bool {
	v, ok := obj[key]
	if !ok {
		return false
	}
	n := rewriteObject(v, edit)
	if bytes.Equal(n, v) {
		return false
	}
	obj[key] = n
	return true
}

// appTool is a tool object with its UI link (_meta.ui.resourceUri and the
// older _meta["ui/resourceUri"]) as listed for server.
func appTool(tool json.RawMessage, server string) json.RawMessage {
	if !hasUI(tool) {
		return tool
	}
	f := func(u string) string { return AppURI(server, u) }
	return rewriteObject(tool, func(t map[string]json.RawMessage) bool {
		return nested(t, "_meta", func(meta map[string]json.RawMessage) bool {
			modern := nested(meta, "ui", func(ui map[string]json.RawMessage) bool { return rewriteString(ui, "resourceUri", f) })
			return rewriteString(meta, legacyUIKey, f) || modern
		})
	})
}

// appItem is a resources/list item (field "uri") or a
// resources/templates/list item (field "uriTemplate") as listed for
// server, and its key (the URI or template) as listed.
func appItem(server, key string, raw json.RawMessage, field string) (string, json.RawMessage) {
	listed := AppURI(server, key)
	if listed == key {
		return key, raw
	}
	return listed, rewriteObject(raw, func(obj map[string]json.RawMessage) bool {
		return rewriteString(obj, field, func(string) string { return listed })
	})
}

// AppResult is a resources/read or tools/call result of server with the
// ui:// URIs in it as listed: each of a read's contents, and a tool
// result's resource_link and embedded resource blocks.
func AppResult(raw json.RawMessage, server string) json.RawMessage {
	if !hasUI(raw) {
		return raw
	}
	f := func(u string) string { return AppURI(server, u) }
	return rewriteObject(raw, func(res map[string]json.RawMessage) bool {
		contents := eachItem(res, "contents", func(it map[string]json.RawMessage) bool { return rewriteString(it, "uri", f) })
		content := eachItem(res, "content", func(it map[string]json.RawMessage) bool { return contentBlock(it, f) })
		return contents || content
	})
}

// contentBlock rewrites the URI of a resource_link or embedded resource
// content block.
func contentBlock(it map[string]json.RawMessage, f func(string) string) bool {
	var typ string
	_ = json.Unmarshal(it["type"], &typ)
	switch typ {
	case "resource_link":
		return rewriteString(it, "uri", f)
	case "resource":
		return nested(it, "resource", func(r map[string]json.RawMessage) bool { return rewriteString(r, "uri", f) })
	}
	return false
}

// eachItem rewrites each object of the array obj[key] with edit; it
// reports whether any changed.
func eachItem(obj map[string]json.RawMessage, key string, edit func(map[string]json.RawMessage) bool) bool {
	v, ok := obj[key]
	if !ok || !hasUI(v) {
		return false
	}
	var items []json.RawMessage
	if json.Unmarshal(v, &items) != nil {
		return false
	}
	changed := false
	for i, it := range items {
		if n := rewriteObject(it, edit); !bytes.Equal(n, it) {
			items[i], changed = n, true
		}
	}
	if changed {
		obj[key], _ = json.Marshal(items)
	}
	return changed
}

// OwnURI is a resources/read's URI as its server knows it: a listed
// ui:// URI without its server segment, any other unchanged.
func OwnURI(uri string) string {
	if _, own, ok := ServerURI(uri); ok {
		return own
	}
	return uri
}

// AppOrigin drops OriginMetaKey from a tools/call's _meta and returns
// the app's ui:// URI it named ("" for none).
func AppOrigin(meta json.RawMessage) (json.RawMessage, string) {
	if !bytes.Contains(meta, []byte(OriginMetaKey)) {
		return meta, ""
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(meta, &m) != nil {
		return meta, ""
	}
	var origin string
	if json.Unmarshal(m[OriginMetaKey], &origin) != nil || !strings.HasPrefix(origin, uiScheme) {
		origin = ""
	}
	delete(m, OriginMetaKey)
	if len(m) == 0 {
		return nil, origin
	}
	b, _ := json.Marshal(m)
	return b, origin
}
