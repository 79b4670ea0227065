package callpath

import (
	"encoding/base64"
	"encoding/json"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Page returns one page of items as a list result under field, with a
// nextCursor when more remain. Cursors are opaque offsets.
func Page(items []json.RawMessage, field, cursor string, size int) (json.RawMessage, error) {
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

// errBadCursor answers a list request whose cursor is not one of ours.
var errBadCursor = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}
