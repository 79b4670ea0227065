package wire

import (
	"bytes"
	"encoding/json"
)

// DropMeta returns params (a JSON object) without the members of its _meta
// for which drop reports true, and without _meta when nothing is left of it.
// mark is a byte string every droppable key contains: params without it are
// returned as they are, undecoded. So are params that are not an object or
// whose _meta is not one.
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
	for k := range meta {
		if drop(k) {
			delete(meta, k)
		}
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
