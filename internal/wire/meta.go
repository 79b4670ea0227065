package wire

import (
	"bytes"
	"encoding/json"
)

// DropMeta returns params (a JSON object) without the members of its _meta
// for which drop reports true, and without _meta when nothing is left of it.
// mark is a byte string every droppable key contains: params without it are
// returned as they are, undecoded. So are params that are not an object,
// whose _meta is not one, or whose _meta has nothing to drop.
func DropMeta(params json.RawMessage, mark string, drop func(key string) bool) json.RawMessage {
	if !bytes.Contains(params, []byte(mark)) {
		return params
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p["_meta"] == nil {
		return params
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &meta) != nil {
		return params
	}
	n := len(meta)
	for k := range meta {
		if drop(k) {
			delete(meta, k)
		}
	}
	if len(meta) == n {
		return params
	}
	if len(meta) == 0 {
		delete(p, "_meta")
	} else {
		p["_meta"], _ = json.Marshal(meta)
	}
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// SetMeta returns params (a JSON object) with the string members kv in its
// _meta, after dropping those of its members for which drop reports true: a
// request mcp-mux forwards carries its own trace context, not its caller's.
// Params that are not an object get an object of their own; a _meta that
// is not an object is replaced.
func SetMeta(params json.RawMessage, kv map[string]string, drop func(key string) bool) json.RawMessage {
	trimmed := bytes.TrimSpace(params)
	if len(trimmed) < 2 || trimmed[0] != '{' {
		trimmed = []byte("{}")
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(trimmed, &p) != nil {
		return params
	}
	meta := map[string]json.RawMessage{}
	if own, ok := p["_meta"]; ok {
		if json.Unmarshal(own, &meta) != nil || meta == nil {
			meta = map[string]json.RawMessage{}
		}
	}
	for k := range meta {
		if drop(k) {
			delete(meta, k)
		}
	}
	for k, v := range kv {
		meta[k], _ = json.Marshal(v)
	}
	p["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// MetaOf returns the raw _meta member of params (a JSON object), nil
// without one.
func MetaOf(params json.RawMessage) json.RawMessage {
	if !bytes.Contains(params, []byte(`"_meta"`)) {
		return nil
	}
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	return p.Meta
}
