package wire

import (
	"bytes"
	"encoding/json"
)

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
	var m memberScan
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			end := stringEnd(data, i+1)
			if end < 0 || !m.name(data[i+1:end], end, fn) {
				return false
			}
			i = end
		case '{', '[':
			m.depth++
			m.keyNext()
		case '}', ']':
			m.depth--
		case ',':
			m.keyNext()
		}
	}
	return m.depth == 0
}

// memberScan is eachMember's state while it walks an object.
type memberScan struct {
	depth int
	key   bool // the next string at depth 1 is a member name
}

// keyNext notes a bracket or comma just passed: at depth 1 (the object's
// own '{' or a ',' between its members) the next string is a member name.
// An inner '[' or '{' (depth 2 and deeper) leaves the key flag as it is.
func (m *memberScan) keyNext() {
	if m.depth == 1 {
		m.key = true
	}
}

// name passes a string that ends at end to fn when it is a member name,
// and reports false when fn stops the scan.
func (m *memberScan) name(raw []byte, end int, fn func(name []byte, end int) bool) bool {
	if m.depth != 1 || !m.key {
		return true
	}
	m.key = false
	return fn(raw, end)
}

// memberValue returns the scalar value after the colon at or after i (ids
// are strings, numbers or null; anything else is not an id).
func memberValue(data []byte, i int) []byte {
	i = skipColon(data, i)
	if i >= len(data) {
		return nil
	}
	if data[i] == '"' {
		return quoted(data, i)
	}
	v := data[i:scalarEnd(data, i)]
	if !isScalar(v) {
		return nil
	}
	return v
}

// skipColon returns the index of the first byte at or after i that is
// neither whitespace nor a colon.
func skipColon(data []byte, i int) int {
	for i < len(data) && (isSpace(data[i]) || data[i] == ':') {
		i++
	}
	return i
}

// quoted returns the string whose opening quote is at i, quotes included,
// or nil when it is left open.
func quoted(data []byte, i int) []byte {
	end := stringEnd(data, i+1)
	if end < 0 {
		return nil
	}
	return data[i : end+1]
}

// scalarEnd returns the index of the first byte at or after i that ends a
// member's unquoted value: a comma, a closing brace or whitespace.
func scalarEnd(data []byte, i int) int {
	for i < len(data) && data[i] != ',' && data[i] != '}' && !isSpace(data[i]) {
		i++
	}
	return i
}

// isScalar reports whether v is one valid JSON number or literal, not an
// array or object.
func isScalar(v []byte) bool {
	return len(v) > 0 && v[0] != '{' && v[0] != '[' && json.Valid(v)
}

// isSpace reports whether c is JSON whitespace.
func isSpace(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n':
		return true
	}
	return false
}
