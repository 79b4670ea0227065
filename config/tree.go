package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// kind is the JSON type of a node.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is one value of the decoded document. Objects keep their keys in file
// order, which JSON maps and encoding/json cannot do. Strings carry both the
// text as written and the text after $VAR expansion.
type node struct {
	kind  kind
	b     bool
	text  string // number literal, or string as written in the file
	value string // string after $VAR expansion
	unset string // the variable a "$VAR" string named when it was not set
	items []*node
	keys  []string
	vals  []*node
}

// get returns the value of key in an object node, or nil.
func (n *node) get(key string) *node {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// dupKey is a key that appeared more than once in one object; the last value
// is kept at the position of the first.
type dupKey struct{ path []string }

// objectBuilder appends keys to an object node, resolving duplicates the way
// Python's json module does (last value wins, first position kept).
type objectBuilder struct {
	n     *node
	index map[string]int
}

func newObjectBuilder() *objectBuilder {
	return &objectBuilder{n: &node{kind: kindObject}, index: map[string]int{}}
}

// set adds key=v and reports whether key was already present.
func (b *objectBuilder) set(key string, v *node) bool {
	if i, ok := b.index[key]; ok {
		b.n.vals[i] = v
		return true
	}
	b.index[key] = len(b.n.keys)
	b.n.keys = append(b.n.keys, key)
	b.n.vals = append(b.n.vals, v)
	return false
}

// decodeJSON parses a JSON document into a node tree.
func decodeJSON(data []byte, file string) (*node, []dupKey, error) {
	if err := checkJSONBounds(data, file); err != nil {
		return nil, nil, err
	}
	// encoding/json reports accurate offsets only from a whole-input scan,
	// so validate first and build the ordered tree from tokens afterwards.
	if err := json.Unmarshal(data, new(json.RawMessage)); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, nil, syntaxAtOffset(file, data, se.Offset, se.Error())
		}
		return nil, nil, &SyntaxError{File: file, Msg: err.Error()}
	}
	d := jsonDecoder{dec: json.NewDecoder(bytes.NewReader(data))}
	d.dec.UseNumber()
	n, err := d.value()
	if err != nil {
		return nil, nil, &SyntaxError{File: file, Msg: err.Error()}
	}
	return n, d.dups, nil
}

type jsonDecoder struct {
	dec  *json.Decoder
	path []string // keys leading to the value being decoded
	dups []dupKey
}

func (d *jsonDecoder) value() (*node, error) {
	tok, err := d.dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &node{kind: kindNull}, nil
	case bool:
		return &node{kind: kindBool, b: t}, nil
	case json.Number:
		return &node{kind: kindNumber, text: string(t)}, nil
	case string:
		return &node{kind: kindString, text: t, value: t}, nil
	case json.Delim:
		switch t {
		case '[':
			n := &node{kind: kindArray}
			for d.dec.More() {
				item, err := d.value()
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, item)
			}
			_, err := d.dec.Token() // ']'
			return n, err
		case '{':
			b := newObjectBuilder()
			for d.dec.More() {
				kt, err := d.dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is not a string")
				}
				d.path = append(d.path, key)
				v, err := d.value()
				if err != nil {
					return nil, err
				}
				if b.set(key, v) {
					d.dups = append(d.dups, dupKey{path: slices.Clone(d.path)})
				}
				d.path = d.path[:len(d.path)-1]
			}
			_, err := d.dec.Token() // '}'
			return b.n, err
		}
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

// syntaxAtOffset builds a SyntaxError whose line and column (1-based, in
// characters) point at the byte encoding/json complained about.
func syntaxAtOffset(file string, data []byte, offset int64, msg string) *SyntaxError {
	// json.SyntaxError.Offset counts the offending byte itself, except at
	// end of input.
	idx := int(offset) - 1
	if offset >= int64(len(data)) {
		idx = len(data)
	}
	idx = max(idx, 0)
	line := 1 + bytes.Count(data[:idx], []byte{'\n'})
	start := bytes.LastIndexByte(data[:idx], '\n') + 1
	col := utf8.RuneCount(data[start:idx]) + 1
	return &SyntaxError{File: file, Line: line, Column: col, Msg: msg}
}

// decodeYAML parses the first YAML document into a node tree, keeping
// mapping order. Scalars resolve as in YAML 1.2 (so "off" stays a string).
func decodeYAML(data []byte, file string) (root *node, dups []dupKey, err error) {
	if err := checkYAMLBounds(data, file); err != nil {
		return nil, nil, err
	}
	var doc yaml.Node
	if err := unmarshalYAML(data, &doc); err != nil {
		// yaml.v3 reports "yaml: line N: message" when it knows the line.
		se := &SyntaxError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
		if rest, ok := strings.CutPrefix(se.Msg, "line "); ok {
			if num, msg, ok := strings.Cut(rest, ": "); ok {
				if line, err := strconv.Atoi(num); err == nil {
					se.Line, se.Msg = line, msg
				}
			}
		}
		return nil, nil, se
	}
	if doc.Kind == 0 || (doc.Kind == yaml.DocumentNode && len(doc.Content) == 0) {
		return &node{kind: kindObject}, nil, nil // an empty file is an empty config
	}
	top := &doc
	if doc.Kind == yaml.DocumentNode {
		top = doc.Content[0]
	}
	c := yamlConverter{file: file, budget: 10000 + 4*len(data)}
	root, err = c.convert(top, 0)
	if err != nil {
		return nil, nil, err
	}
	return root, c.dups, nil
}

// unmarshalYAML shields the loader from a panic inside the YAML library: a
// malformed file must be an error, never a crash of a running proxy.
func unmarshalYAML(data []byte, out *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: cannot parse document")
		}
	}()
	return yaml.Unmarshal(data, out)
}

type yamlConverter struct {
	file   string
	budget int // nodes left; aliases can make a small file expand enormously
	path   []string
	dups   []dupKey
}

func (c *yamlConverter) errAt(n *yaml.Node, msg string) error {
	return &SyntaxError{File: c.file, Line: n.Line, Column: n.Column, Msg: msg}
}

// convert converts n, which depth collections enclose. MaxDepth bounds
// nesting here too, because an alias (which may be cyclic) nests a copy of
// what it names, and the raw-bytes scan sees only the alias.
func (c *yamlConverter) convert(n *yaml.Node, depth int) (*node, error) {
	c.budget--
	if c.budget < 0 {
		return nil, c.errAt(n, "document expands to too many values (check aliases)")
	}
	if (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && depth >= MaxDepth {
		return nil, c.errAt(n, tooDeepMsg()+" (check aliases)")
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, c.errAt(n, "unknown alias")
		}
		return c.convert(n.Alias, depth)
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return &node{kind: kindNull}, nil
		}
		return c.convert(n.Content[0], depth)
	case yaml.SequenceNode:
		out := &node{kind: kindArray}
		for _, item := range n.Content {
			v, err := c.convert(item, depth+1)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return nil, c.errAt(n, "unsupported YAML node")
}

func (c *yamlConverter) mapping(n *yaml.Node, depth int) (*node, error) {
	b := newObjectBuilder()
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		for k.Kind == yaml.AliasNode && k.Alias != nil {
			k = k.Alias
		}
		if k.Kind != yaml.ScalarNode {
			return nil, c.errAt(k, "mapping keys must be scalars")
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		c.path = append(c.path, k.Value)
		val, err := c.convert(v, depth+1)
		if err != nil {
			return nil, err
		}
		if b.set(k.Value, val) {
			c.dups = append(c.dups, dupKey{path: slices.Clone(c.path)})
		}
		c.path = c.path[:len(c.path)-1]
	}
	// "<<: *base" merges keys that the mapping does not set itself.
	for _, m := range merges {
		srcs := []*yaml.Node{m}
		if m.Kind == yaml.SequenceNode {
			srcs = m.Content
		}
		for _, src := range srcs {
			v, err := c.convert(src, depth) // merged into this mapping's level
			if err != nil {
				return nil, err
			}
			if v.kind != kindObject {
				return nil, c.errAt(src, "merge key value must be a mapping")
			}
			for i, key := range v.keys {
				if _, ok := b.index[key]; !ok {
					b.set(key, v.vals[i])
				}
			}
		}
	}
	return b.n, nil
}

func (c *yamlConverter) scalar(n *yaml.Node) (*node, error) {
	switch n.ShortTag() {
	case "!!null":
		return &node{kind: kindNull}, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.errAt(n, "invalid boolean")
		}
		return &node{kind: kindBool, b: b}, nil
	case "!!int", "!!float":
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, c.errAt(n, "invalid number")
		}
		var text string
		switch x := v.(type) {
		case int:
			text = strconv.Itoa(x)
		case int64:
			text = strconv.FormatInt(x, 10)
		case uint64:
			text = strconv.FormatUint(x, 10)
		case float64:
			switch {
			case math.IsNaN(x):
				return nil, c.errAt(n, "NaN is not a valid value")
			case math.IsInf(x, 1):
				text = "1e999" // decodes as +Inf: reported as "not finite" where numbers are checked
			case math.IsInf(x, -1):
				text = "-1e999"
			default:
				text = strconv.FormatFloat(x, 'g', -1, 64)
			}
		default:
			return nil, c.errAt(n, "invalid number")
		}
		return &node{kind: kindNumber, text: text}, nil
	}
	// !!str, !!timestamp, !!binary and custom tags are kept as text.
	return &node{kind: kindString, text: n.Value, value: n.Value}, nil
}

// expand applies DeerFlow's whole-string $VAR rule to every string value
// (never to keys): a string starting with "$" is replaced by the variable
// named by the rest of it, or "" when unset.
func expand(n *node, lookup func(string) (string, bool)) {
	switch n.kind {
	case kindString:
		n.value, n.unset = n.text, ""
		if strings.HasPrefix(n.text, "$") {
			var ok bool
			if n.value, ok = lookup(n.text[1:]); !ok {
				n.unset = n.text[1:]
			}
		}
	case kindArray:
		for _, item := range n.items {
			expand(item, lookup)
		}
	case kindObject:
		for _, v := range n.vals {
			expand(v, lookup)
		}
	}
}

// rawJSON encodes n compactly as written in the file (before expansion), in
// file order.
func rawJSON(n *node) json.RawMessage {
	var buf []byte
	buf = appendNode(buf, n)
	return buf
}

func appendNode(buf []byte, n *node) []byte {
	switch n.kind {
	case kindNull:
		return append(buf, "null"...)
	case kindBool:
		return strconv.AppendBool(buf, n.b)
	case kindNumber:
		return append(buf, n.text...)
	case kindString:
		return appendString(buf, n.text)
	case kindArray:
		buf = append(buf, '[')
		for i, item := range n.items {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendNode(buf, item)
		}
		return append(buf, ']')
	default:
		buf = append(buf, '{')
		for i, k := range n.keys {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = appendString(buf, k)
			buf = append(buf, ':')
			buf = appendNode(buf, n.vals[i])
		}
		return append(buf, '}')
	}
}

// appendString appends s as a JSON string without HTML escaping, so the text
// stays as the user wrote it.
func appendString(buf []byte, s string) []byte {
	const hex = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20:
				buf = append(buf, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				buf = append(buf, c)
			}
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
