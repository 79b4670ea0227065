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
		return &Node{Kind: Object}, nil, nil // an empty file is an empty config
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
	dups   []DupKey
}

func (c *yamlConverter) errAt(n *yaml.Node, msg string) error {
	return &SyntaxError{File: c.file, Line: n.Line, Column: n.Column, Msg: msg}
}

// convert converts n, which depth collections enclose. MaxDepth bounds
// nesting here too, because an alias (which may be cyclic) nests a copy of
// what it names, and the raw-bytes scan sees only the alias.
func (c *yamlConverter) convert(n *yaml.Node, depth int) (*Node, error) {
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
			return &Node{Kind: Null}, nil
		}
		return c.convert(n.Content[0], depth)
	case yaml.SequenceNode:
		out := &Node{Kind: Array}
		for _, item := range n.Content {
			v, err := c.convert(item, depth+1)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, v)
		}
		return out, nil
	case yaml.MappingNode:
		return c.mapping(n, depth)
	case yaml.ScalarNode:
		return c.scalar(n)
	}
	return nil, c.errAt(n, "unsupported YAML node")
}

func (c *yamlConverter) mapping(n *yaml.Node, depth int) (*Node, error) {
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
			c.dups = append(c.dups, DupKey{Path: slices.Clone(c.path)})
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
			if v.Kind != Object {
				return nil, c.errAt(src, "merge key value must be a mapping")
			}
			for i, key := range v.Keys {
				if _, ok := b.index[key]; !ok {
					b.set(key, v.Vals[i])
				}
			}
		}
	}
	return b.n, nil
}

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
		return &Node{Kind: Number, Text: text}, nil
	}
	// !!str, !!timestamp, !!binary and custom tags are kept as text.
	return &Node{Kind: String, Text: n.Value, Value: n.Value}, nil
}
