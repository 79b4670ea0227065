package callpath

import (
	"bytes"
	"context"
	"encoding/json"
)

// metaServerInfo is the _meta key in which a 2026-07-28 server names
// itself on each result (SEP-2575).
const metaServerInfo = "io.modelcontextprotocol/serverInfo"

// provenanceStage keeps the upstream's identity out of what the caller
// gets: a result's _meta["io.modelcontextprotocol/serverInfo"] names the
// upstream (go-sdk sets it on every 2026-07-28 result), while the caller's
// server is mcp-mux (its server/discover and initialize say so; go-sdk's
// session adds mcp-mux's own serverInfo on the 2026-07-28 SDK path). The
// member is dropped from every upstream result before any other stage
// sees it; a result without it is passed on untouched (one byte search).
func provenanceStage(*Router) Stage {
	return Stage{
		Name:    "provenance",
		Methods: AllMethods,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				raw, err := next(ctx, c)
				if err == nil {
					raw = DropServerInfo(raw)
				}
				return raw, err
			}
		},
	}
}

// DropServerInfo returns raw without _meta's serverInfo member (and
// without _meta when that was its only member); raw itself when it has
// none or is not a JSON object.
func DropServerInfo(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(metaServerInfo)) {
		return raw
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	var meta map[string]json.RawMessage
	if json.Unmarshal(obj["_meta"], &meta) != nil || meta[metaServerInfo] == nil {
		return raw
	}
	delete(meta, metaServerInfo)
	if len(meta) == 0 {
		delete(obj, "_meta")
	} else {
		obj["_meta"], _ = json.Marshal(meta)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}
