package stdioproc

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// errTooDeep fails a request whose reply nests deeper than wire.MaxDepth;
// the caller sees it as a tool error naming the server.
var errTooDeep = fmt.Errorf("reply refused: %w", wire.ErrTooDeep)

// deepLine stands in for a stdio line that wire.Scan refused: for one
// message, deepReply; for a batch, element by element: an element within
// the limit is delivered as usual, one too deep is deepReply'd. So every
// call a too-deep line answers fails at once, whatever else shares its line.
func deepLine(line []byte) []jsonrpc.Message {
	elems := wire.Elements(line)
	if elems == nil {
		if m := deepReply(line); m != nil {
			return []jsonrpc.Message{m}
		}
		return nil
	}
	var out []jsonrpc.Message
	for _, e := range elems {
		if _, err := wire.Scan(e); err != nil {
			if m := deepReply(e); m != nil {
				out = append(out, m)
			}
			continue
		}
		if m, err := jsonrpc.DecodeMessage(e); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// deepReply stands in for a stdio line that wire.Scan refused: no decoder
// sees the line, but when it answers a request (it has a top-level id) that
// request fails with errTooDeep instead of waiting for an answer that never
// comes, and the session lives on. nil means the line is skipped.
func deepReply(line []byte) jsonrpc.Message {
	raw := wire.TopLevelID(line)
	var v any
	if raw == nil || json.Unmarshal(raw, &v) != nil || v == nil {
		return nil
	}
	id, err := jsonrpc.MakeID(v)
	if err != nil {
		return nil
	}
	return &jsonrpc.Response{ID: id, Error: errTooDeep}
}
