// Package rawdoc decodes a config document, JSON or YAML, as written: an
// ordered tree of values that keeps every object's keys in file order and
// every string as written, bounded in size and nesting before any tree is
// built, with syntax errors that name the line and column. It knows nothing
// of what the document means; package config validates it.
package rawdoc

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// Kind is the JSON type of a Node.
type Kind uint8

// The kinds of value.
const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Node is one value of the decoded document. Objects keep their keys in file
// order, which JSON maps and encoding/json cannot do. Strings carry both the
// text as written and the text after $VAR expansion (which the decoders
// leave equal; package config expands).
type Node struct {
	Kind  Kind
	Bool  bool
	Text  string // number literal, or string as written in the file
	Value string // string after $VAR expansion
	Unset string // the variable a "$VAR" string named when it was not set
	Items []*Node
	Keys  []string
	Vals  []*Node
}

// Get returns the value of key in an object node, or nil.
func (n *Node) Get(key string) *Node {
	for i, k := range n.Keys {
		if k == key {
			return n.Vals[i]
		}
	}
	return nil
}

// Obj returns key's value when n is an object, else nil; n may be nil.
func (n *Node) Obj(key string) *Node {
	if n == nil || n.Kind != Object {
		return nil
	}
	return n.Get(key)
}

// Set replaces or appends key in an object node.
func (n *Node) Set(key string, v *Node) {
	for i, k := range n.Keys {
		if k == key {
			n.Vals[i] = v
			return
		}
	}
	n.Keys = append(n.Keys, key)
	n.Vals = append(n.Vals, v)
}

// Str returns a string node whose text (and value) is s.
func Str(s string) *Node { return &Node{Kind: String, Text: s, Value: s} }

// DupKey is a key that appeared more than once in one object; the last value
// is kept at the position of the first.
type DupKey struct{ Path []string }

// objectBuilder appends keys to an object node, resolving duplicates the way
// Python's json module does (last value wins, first position kept).
type objectBuilder struct {
	n     *Node
	index map[string]int
}

func newObjectBuilder() *objectBuilder {
	return &objectBuilder{n: &Node{Kind: Object}, index: map[string]int{}}
}

// addMissing adds the keys of object v that b does not have yet.
func (b *objectBuilder) addMissing(v *Node) {
	for i, key := range v.Keys {
		if _, ok := b.index[key]; !ok {
			b.set(key, v.Vals[i])
		}
	}
}

// set adds key=v and reports whether key was already present.
func (b *objectBuilder) set(key string, v *Node) bool {
	if i, ok := b.index[key]; ok {
		b.n.Vals[i] = v
		return true
	}
	b.index[key] = len(b.n.Keys)
	b.n.Keys = append(b.n.Keys, key)
	b.n.Vals = append(b.n.Vals, v)
	return false
}

// JSON encodes n compactly as written in the file (before $VAR
// expansion), in file order.
func (n *Node) JSON() json.RawMessage {
	var buf []byte
	buf = appendNode(buf, n)
	return buf
}

// appendNode appends n as compact JSON, as written.
func appendNode(buf []byte, n *Node) []byte {
	switch n.Kind {
	case Null:
		return append(buf, "null"...)
	case Bool:
		return strconv.AppendBool(buf, n.Bool)
	case Number:
		return append(buf, n.Text...)
	case String:
		return appendString(buf, n.Text)
	case Array:
		return appendArray(buf, n)
	default:
		return appendObject(buf, n)
	}
}

// appendArray appends an array node as compact JSON.
func appendArray(buf []byte, n *Node) []byte {
	buf = append(buf, '[')
	for i, item := range n.Items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendNode(buf, item)
	}
	return append(buf, ']')
}

// appendObject appends an object node as compact JSON, in key order.
func appendObject(buf []byte, n *Node) []byte {
	buf = append(buf, '{')
	for i, k := range n.Keys {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendString(buf, k)
		buf = append(buf, ':')
		buf = appendNode(buf, n.Vals[i])
	}
	return append(buf, '}')
}

// appendString appends s as a JSON string without HTML escaping, so the text
// stays as the user wrote it; invalid UTF-8 becomes U+FFFD.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			buf = appendASCII(buf, c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, `\ufffd`...)
		} else {
			buf = append(buf, s[i:i+size]...)
		}
		i += size
	}
	return append(buf, '"')
}

// appendASCII appends one ASCII character of a JSON string, escaped when
// JSON requires it.
func appendASCII(buf []byte, c byte) []byte {
	const hex = "0123456789abcdef"
	switch {
	case c == '"' || c == '\\':
		return append(buf, '\\', c)
	case c == '\n':
		return append(buf, '\\', 'n')
	case c == '\r':
		return append(buf, '\\', 'r')
	case c == '\t':
		return append(buf, '\\', 't')
	case c < 0x20:
		return append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
	}
	return append(buf, c)
}
