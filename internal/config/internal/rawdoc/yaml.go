package rawdoc

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// DecodeYAML parses the first YAML document into a node tree, keeping
// mapping order. Scalars resolve as in YAML 1.2 (so "off" stays a string).
func DecodeYAML(data []byte, file string) (root *Node, dups []DupKey, err error) {
	if err := checkYAMLBounds(data, file); err != nil {
		return nil, nil, err
	}
	var doc yaml.Node
	if err := unmarshalYAML(data, &doc); err != nil {
		return nil, nil, yamlSyntaxError(file, err)
	}
	top := topNode(&doc)
	if top == nil {
		return &Node{Kind: Object}, nil, nil // an empty file is an empty config
	}
	c := yamlConverter{file: file, budget: 10000 + 4*len(data)}
	root, err = c.convert(top, 0)
	if err != nil {
		return nil, nil, err
	}
	return root, c.dups, nil
}

// topNode returns the document's top node, or nil for an empty document.
func topNode(doc *yaml.Node) *yaml.Node {
	switch {
	case doc.Kind == 0:
		return nil
	case doc.Kind != yaml.DocumentNode:
		return doc
	case len(doc.Content) == 0:
		return nil
	}
	return doc.Content[0]
}

// yamlSyntaxError turns yaml.v3's error into a SyntaxError, with the line
// when it says "yaml: line N: message".
func yamlSyntaxError(file string, err error) *SyntaxError {
	se := &SyntaxError{File: file, Msg: strings.TrimPrefix(err.Error(), "yaml: ")}
	rest, ok := strings.CutPrefix(se.Msg, "line ")
	if !ok {
		return se
	}
	if num, msg, ok := strings.Cut(rest, ": "); ok {
		if line, err := strconv.Atoi(num); err == nil {
			se.Line, se.Msg = line, msg
		}
	}
	return se
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

// yamlConverter builds a Node tree from yaml.v3's nodes, resolving
// aliases and merge keys within a budget of values.
type yamlConverter struct {
	file   string
	budget int // nodes left; aliases can make a small file expand enormously
	path   []string
	dups   []DupKey
}

// errAt is a SyntaxError at n's position.
func (c *yamlConverter) errAt(n *yaml.Node, msg string) error {
	return &SyntaxError{File: c.file, Line: n.Line, Column: n.Column, Msg: msg}
}

// convert converts n, which depth collections enclose. MaxDepth bounds
// nesting here too, because an alias (which may be cyclic) nests a copy of
// what it names, and the raw-bytes scan sees only the alias.
func (c *yamlConverter) convert(n *yaml.Node, depth int) (*Node, error) {
	if err := c.spend(n, depth); err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.AliasNode, yaml.DocumentNode:
		return c.wrapped(n, depth)
	case yaml.SequenceNode:
		return c.sequence(n, depth)
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return nil, c.errAt(n, "unsupported YAML node")
}

// wrapped converts what an alias names, or a nested document's content
// (null when empty).
func (c *yamlConverter) wrapped(n *yaml.Node, depth int) (*Node, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return nil, c.errAt(n, "unknown alias")
		}
		return c.convert(n.Alias, depth)
	}
	if len(n.Content) == 0 {
		return &Node{Kind: Null}, nil
	}
	return c.convert(n.Content[0], depth)
}

// spend takes n from the budget of values and refuses a collection
// nested deeper than MaxDepth.
func (c *yamlConverter) spend(n *yaml.Node, depth int) error {
	c.budget--
	if c.budget < 0 {
		return c.errAt(n, "document expands to too many values (check aliases)")
	}
	if (n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode) && depth >= MaxDepth {
		return c.errAt(n, tooDeepMsg()+" (check aliases)")
	}
	return nil
}

// sequence converts a sequence's items.
func (c *yamlConverter) sequence(n *yaml.Node, depth int) (*Node, error) {
	out := &Node{Kind: Array}
	for _, item := range n.Content {
		v, err := c.convert(item, depth+1)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, v)
	}
	return out, nil
}

// mapping converts a mapping: its own keys first (recording duplicates),
// then the keys of "<<" merges that it does not set itself.
func (c *yamlConverter) mapping(n *yaml.Node, depth int) (*Node, error) {
	b := newObjectBuilder()
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := c.key(n.Content[i])
		if err != nil {
			return nil, err
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, n.Content[i+1])
			continue
		}
		if err := c.member(b, k.Value, n.Content[i+1], depth); err != nil {
			return nil, err
		}
	}
	for _, m := range merges {
		if err := c.merge(b, m, depth); err != nil {
			return nil, err
		}
	}
	return b.n, nil
}

// key resolves a mapping key through aliases; it must be a scalar.
func (c *yamlConverter) key(k *yaml.Node) (*yaml.Node, error) {
	for k.Kind == yaml.AliasNode && k.Alias != nil {
		k = k.Alias
	}
	if k.Kind != yaml.ScalarNode {
		return nil, c.errAt(k, "mapping keys must be scalars")
	}
	return k, nil
}

// member converts the value v of key into b, recording a duplicate key.
func (c *yamlConverter) member(b *objectBuilder, key string, v *yaml.Node, depth int) error {
	c.path = append(c.path, key)
	val, err := c.convert(v, depth+1)
	if err != nil {
		return err
	}
	if b.set(key, val) {
		c.dups = append(c.dups, DupKey{Path: slices.Clone(c.path)})
	}
	c.path = c.path[:len(c.path)-1]
	return nil
}

// merge adds to b the keys of "<<: *base" (one mapping or a sequence of
// them) that b does not have yet, at b's level.
func (c *yamlConverter) merge(b *objectBuilder, m *yaml.Node, depth int) error {
	srcs := []*yaml.Node{m}
	if m.Kind == yaml.SequenceNode {
		srcs = m.Content
	}
	for _, src := range srcs {
		v, err := c.convert(src, depth) // merged into this mapping's level
		if err != nil {
			return err
		}
		if v.Kind != Object {
			return c.errAt(src, "merge key value must be a mapping")
		}
		b.addMissing(v)
	}
	return nil
}

// scalar converts a scalar by its resolved tag: null, bool, number, and
// text for everything else (!!str, !!timestamp, !!binary, custom tags).
func (c *yamlConverter) scalar(n *yaml.Node) (*Node, error) {
	switch n.ShortTag() {
	case "!!null":
		return &Node{Kind: Null}, nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, c.errAt(n, "invalid boolean")
		}
		return &Node{Kind: Bool, Bool: b}, nil
	case "!!int", "!!float":
		return c.number(n)
	}
	return &Node{Kind: String, Text: n.Value, Value: n.Value}, nil
}

// number converts an !!int or !!float scalar to a number literal; NaN
// is refused and the infinities become literals that decode as such.
func (c *yamlConverter) number(n *yaml.Node) (*Node, error) {
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
		if math.IsNaN(x) {
			return nil, c.errAt(n, "NaN is not a valid value")
		}
		text = floatLiteral(x)
	default:
		return nil, c.errAt(n, "invalid number")
	}
	return &Node{Kind: Number, Text: text}, nil
}

// floatLiteral writes x as a JSON number; ±Inf become 1e999 and -1e999,
// which decode as ±Inf and are reported as "not finite" where numbers are
// checked.
func floatLiteral(x float64) string {
	switch {
	case math.IsInf(x, 1):
		return "1e999"
	case math.IsInf(x, -1):
		return "-1e999"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}
