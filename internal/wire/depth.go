package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// MaxDepth is the deepest nesting of arrays and objects mcp-mux reads from a
// client or an upstream, counted from the message's outermost bracket. It is
// go-sdk's own limit, so a message that passes here never fails the SDK's
// check, and it is far beyond real MCP traffic: a JSON Schema for a tool's
// arguments nests tens of levels. Deeper input is refused before any decoder
// sees it: segmentio's decoder, which the fast path uses, recurses once per
// level and overflows the stack on a few megabytes of brackets.
const MaxDepth = 1000

// MaxBatch is the most messages a 2025-03-26 JSON-RPC batch may carry.
// Batching was dropped from the protocol in 2025-06-18; clients that still
// send batches send a handful of messages.
const MaxBatch = 32

// ErrTooDeep reports JSON nested deeper than MaxDepth.
var ErrTooDeep = errors.New("JSON nested deeper than " + strconv.Itoa(MaxDepth) + " levels")

// Shape is what Scan found out about a message.
type Shape struct {
	// Batch is set when the top-level value is an array.
	Batch bool
	// Len is the number of elements of a batch.
	Len int
}

// Scan makes one allocation-free pass over data and returns ErrTooDeep if
// arrays and objects nest deeper than MaxDepth. It does not validate the
// JSON otherwise (the decoder that follows does), but it skips strings
// correctly, so brackets inside strings never count.
func Scan(data []byte) (Shape, error) {
	var sh Shape
	depth := 0
	elems := false // the top-level array has a first element
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '"':
			end := stringEnd(data, i+1)
			if end < 0 {
				return sh, nil // unterminated: the decoder reports it
			}
			if depth == 1 && sh.Batch && !elems {
				elems = true
				sh.Len = 1
			}
			i = end
		case '{', '[':
			if depth == 0 && c == '[' {
				sh.Batch = true
			} else if depth == 1 && sh.Batch && !elems {
				elems = true
				sh.Len = 1
			}
			depth++
			if depth > MaxDepth {
				return sh, ErrTooDeep
			}
		case '}', ']':
			depth--
		case ',':
			if depth == 1 && sh.Batch {
				sh.Len++
			}
		case ' ', '\t', '\r', '\n':
		default:
			if depth == 1 && sh.Batch && !elems {
				elems = true
				sh.Len = 1
			}
		}
	}
	return sh, nil
}

// stringEnd returns the index of the quote that closes the string whose
// contents start at i, or -1.
func stringEnd(data []byte, i int) int {
	for {
		j := bytes.IndexByte(data[i:], '"')
		if j < 0 {
			return -1
		}
		j += i
		// The quote is escaped when an odd number of backslashes precede it.
		k := j
		for k > i && data[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
		i = j + 1
	}
}

// TopLevelID returns the raw value of the "id" member of the object data
// holds, without decoding anything nested, or nil. It is how a message that
// may not be decoded (too deep) can still be answered or matched to its
// request.
func TopLevelID(data []byte) []byte {
	data = bytes.TrimSpace(data)
	var id []byte
	eachMember(data, func(name []byte, end int) bool {
		if string(name) == "id" {
			id = memberValue(data, end+1)
			return false
		}
		return true
	})
	return id
}

// KeysHavePrefix reports whether data holds an object every member name of
// which starts with prefix, without decoding anything. A name written with
// escapes does not count as starting with it.
func KeysHavePrefix(data []byte, prefix string) bool {
	data = bytes.TrimSpace(data)
	if len(data) < 2 {
		return false
	}
	ok := true
	complete := eachMember(data, func(name []byte, _ int) bool {
		ok = bytes.HasPrefix(name, []byte(prefix)) && bytes.IndexByte(name, '\\') < 0
		return ok
	})
	return ok && complete
}

// eachMember calls fn with the raw name of each member of the object data
// holds (escapes as written) and the index of the name's closing quote,
// until fn returns false, in one pass that decodes nothing. It reports
// whether the scan reached the end of data with every bracket closed
// (false for data that is not an object, a string left open, or fn
// stopping it).
func eachMember(data []byte, fn func(name []byte, end int) bool) bool {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	depth := 0
	key := false // the next string at depth 1 is a member name
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end := stringEnd(data, i+1)
			if end < 0 {
				return false
			}
			if depth == 1 && key {
				if !fn(data[i+1:end], end) {
					return false
				}
				key = false
			}
			i = end
		case '{', '[':
			depth++
			if depth == 1 {
				key = true
			}
		case '}', ']':
			depth--
		case ',':
			if depth == 1 {
				key = true
			}
		}
	}
	return depth == 0
}

// memberValue returns the scalar value after the colon at or after i (ids
// are strings, numbers or null; anything else is not an id).
func memberValue(data []byte, i int) []byte {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n' || data[i] == ':') {
		i++
	}
	if i >= len(data) {
		return nil
	}
	if data[i] == '"' {
		end := stringEnd(data, i+1)
		if end < 0 {
			return nil
		}
		return data[i : end+1]
	}
	j := i
	for j < len(data) && data[j] != ',' && data[j] != '}' && data[j] != ' ' && data[j] != '\t' && data[j] != '\r' && data[j] != '\n' {
		j++
	}
	v := data[i:j]
	if len(v) == 0 || v[0] == '{' || v[0] == '[' || !json.Valid(v) {
		return nil
	}
	return v
}
