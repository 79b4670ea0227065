package callpath

import (
	"encoding/json"
	"fmt"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
)

// The URIs in the extension's results, rewritten from a server's form to
// the mux's: the entries of skills/list and skills/get (uri and each
// resources[].uri), the children of resources/directory/read, the contents
// of resources/read. Every other member is kept as the server sent it.

// skills is a view's skill rules, as the call path holds them.
type skills = catalog.Skills[*Backend]

// skillServer is one skill server of a view.
type skillServer = catalog.SkillServer[*Backend]

// rewriteSkillList rewrites a skills/list page: each entry under the mux's
// URIs, an entry the guardrails hide or past the extension's file limit
// left out.
func rewriteSkillList(raw json.RawMessage, k *skills, sv skillServer) (json.RawMessage, error) {
	m, err := members(raw)
	if err != nil {
		return nil, err
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(m["skills"], &entries); err != nil {
		return nil, fmt.Errorf("skills/list: skills is not an array of entries: %w", err)
	}
	kept := make([]json.RawMessage, 0, len(entries))
	for _, e := range entries {
		up := entryURI(e)
		if up == "" || !k.Allowed(sv, up) {
			continue
		}
		if out, ok := rewriteEntry(e, k, sv); ok {
			kept = append(kept, out)
		}
	}
	m["skills"], _ = json.Marshal(kept)
	return json.Marshal(m)
}

// rewriteSkillResult rewrites the URIs of a skills/get, directory read or
// resources/read result.
func rewriteSkillResult(method string, raw json.RawMessage, k *skills, sv skillServer) (json.RawMessage, error) {
	m, err := members(raw)
	if err != nil {
		return nil, err
	}
	switch method {
	case "skills/get":
		e, ok := rewriteEntry(m["skill"], k, sv)
		if !ok {
			return nil, fmt.Errorf("skills/get: the server's skill entry is malformed or past %d files", maxSkillResources)
		}
		m["skill"] = e
	case "resources/directory/read":
		m["resources"] = rewriteURIs(m["resources"], k, sv)
	case "resources/read":
		m["contents"] = rewriteURIs(m["contents"], k, sv)
	}
	return json.Marshal(m)
}

// rewriteEntry rewrites one skill entry; false for one that is not an
// object or lists more files than the extension allows.
func rewriteEntry(e json.RawMessage, k *skills, sv skillServer) (json.RawMessage, bool) {
	m, err := members(e)
	if err != nil {
		return nil, false
	}
	var uri string
	if json.Unmarshal(m["uri"], &uri) == nil && uri != "" {
		m["uri"], _ = json.Marshal(k.Exposed(sv, uri))
	}
	var files []json.RawMessage
	if json.Unmarshal(m["resources"], &files) == nil && files != nil {
		if len(files) > maxSkillResources {
			return nil, false
		}
		m["resources"] = rewriteURIs(m["resources"], k, sv)
	}
	out, err := json.Marshal(m)
	return out, err == nil
}

// rewriteURIs rewrites the uri of each object of an array; anything else
// is kept.
func rewriteURIs(arr json.RawMessage, k *skills, sv skillServer) json.RawMessage {
	var items []json.RawMessage
	if json.Unmarshal(arr, &items) != nil {
		return arr
	}
	for i, it := range items {
		m, err := members(it)
		if err != nil {
			continue
		}
		var uri string
		if json.Unmarshal(m["uri"], &uri) != nil {
			continue
		}
		m["uri"], _ = json.Marshal(k.Exposed(sv, uri))
		if b, err := json.Marshal(m); err == nil {
			items[i] = b
		}
	}
	out, err := json.Marshal(items)
	if err != nil {
		return arr
	}
	return out
}

// members decodes a JSON object's members.
func members(raw json.RawMessage) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("expected a JSON object")
	}
	return m, nil
}
