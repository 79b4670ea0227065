package config

import (
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// expand applies DeerFlow's whole-string $VAR rule to every string value
// (never to keys): a string starting with "$" is replaced by the variable
// named by the rest of it, or "" when unset.
func expand(n *rawdoc.Node, lookup func(string) (string, bool)) {
	switch n.Kind {
	case rawdoc.String:
		expandString(n, lookup)
	case rawdoc.Array:
		for _, item := range n.Items {
			expand(item, lookup)
		}
	case rawdoc.Object:
		for _, v := range n.Vals {
			expand(v, lookup)
		}
	}
}

// expandString sets a string node's value: the text as written, or for
// "$VAR" the variable's value ("" and Unset naming it when unset).
func expandString(n *rawdoc.Node, lookup func(string) (string, bool)) {
	n.Value, n.Unset = n.Text, ""
	name, ok := strings.CutPrefix(n.Text, "$")
	if !ok {
		return
	}
	if n.Value, ok = lookup(name); !ok {
		n.Unset = name
	}
}
