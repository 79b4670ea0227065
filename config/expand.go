package config

import (
	"strings"

	"github.com/mcp-mux/mcp-mux/config/internal/rawdoc"
)

// expand applies DeerFlow's whole-string $VAR rule to every string value
// (never to keys): a string starting with "$" is replaced by the variable
// named by the rest of it, or "" when unset.
func expand(n *rawdoc.Node, lookup func(string) (string, bool)) {
	switch n.Kind {
	case rawdoc.String:
		n.Value, n.Unset = n.Text, ""
		if strings.HasPrefix(n.Text, "$") {
			var ok bool
			if n.Value, ok = lookup(n.Text[1:]); !ok {
				n.Unset = n.Text[1:]
			}
		}
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
