package rawdoc

import (
	"encoding/json"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// The YAML pre-scan follows block structure by columns; these documents
// nest exactly depth levels.
func TestYAMLTooDeep(t *testing.T) {
	block := func(depth int) string {
		var b strings.Builder
		for i := range depth {
			b.WriteString(strings.Repeat("  ", i) + "k:\n")
		}
		return b.String() + strings.Repeat("  ", depth) + "k: 1\n"
	}
	tests := []struct {
		name string
		doc  string
		deep bool
	}{
		{"block mappings at the bound", block(MaxDepth - 1), false},
		{"block mappings past it", block(MaxDepth), true},
		{"compact sequences at the bound", strings.Repeat("- ", MaxDepth) + "x\n", false},
		{"compact sequences past it", strings.Repeat("- ", MaxDepth+1) + "x\n", true},
		{"flow past it", "a: " + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + "\n", true},
		{"flow at the bound", "a: " + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + "\n", false},
		{"flow over lines", "a: [\n" + strings.Repeat("  [\n", MaxDepth) + strings.Repeat("  ]\n", MaxDepth) + "]\n", true},
		{"indentless sequences at the bound", indentless(MaxDepth/2 - 1), false},
		{"indentless sequences past it", indentless(MaxDepth / 2), true},
		{"long sibling lists", strings.Repeat("- name: a\n  v: 1\n", 1000), false},
		{"siblings after a deep value", block(MaxDepth-2) + strings.Repeat("k2: 1\n", 100), false},
		{"brackets in scalars", strings.Repeat("k: a[[[[[[ # [[[[\n", 10) + "q: '" + strings.Repeat("[", 100) + "'\nd: \"[[[\\\"[[[\"\n", false},
		{"block scalar content", "s: |\n" + strings.Repeat("  - - - - - - - - - - - - - - - - - - [[[[[[[[[[[[[\n", 10) + "t: 1\n", false},
		{"quoted over lines", "s: \"" + strings.Repeat("\n  - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -", 3) + "\"\n", false},
		{"documents", "---\n" + block(40) + "---\n" + block(40), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := yamlTooDeep([]byte(tt.doc))
			if (at >= 0) != tt.deep {
				t.Errorf("yamlTooDeep = %d, want too deep: %v", at, tt.deep)
			}
			var doc yaml.Node
			if err := yaml.Unmarshal([]byte(tt.doc), &doc); err != nil {
				t.Fatalf("test document is not YAML: %v", err)
			}
			if d := yamlNodeDepth(&doc); (d > MaxDepth) != tt.deep {
				t.Fatalf("test document nests %d deep", d)
			}
		})
	}
}

// indentless nests levels sequences, each under a key at its own column:
// 2*levels+1 collections.
func indentless(levels int) string {
	var b strings.Builder
	b.WriteString("k:\n")
	for i := range levels {
		b.WriteString(strings.Repeat("  ", i) + "- k:\n")
	}
	return b.String()
}

func yamlNodeDepth(n *yaml.Node) int {
	d := 0
	for _, c := range n.Content {
		d = max(d, yamlNodeDepth(c))
	}
	if n.Kind == yaml.SequenceNode || n.Kind == yaml.MappingNode {
		d++
	}
	return d
}

// FuzzBoundedParse holds the loader to its bounds: whatever it accepts
// nests at most MaxDepth deep, and the pre-scans never refuse what a YAML
// or JSON encoder writes for an accepted document.
func FuzzBoundedParse(f *testing.F) {
	for _, s := range []string{
		`{"mcpServers": {"a": {"command": "x", "extra": [[[{"b": [1, "]]"]}]]]}}}`,
		"mcpServers:\n  a:\n    command: x\n    extra:\n    - - k: [1, {b: c}]\n      - |\n        - - [[\n",
		"a: &x [*x]\n",
		"? - a\n: - b\n",
		"a: 'it''s [' # [\nb: \"\\\"[\"\n",
		strings.Repeat("[", 70) + strings.Repeat("]", 70),
	} {
		f.Add([]byte(s), strings.HasPrefix(s, "{") || strings.HasPrefix(s, "["))
	}
	f.Fuzz(func(t *testing.T, data []byte, isJSON bool) {
		var (
			n   *Node
			err error
		)
		if isJSON {
			n, _, err = DecodeJSON(data, "c.json")
		} else {
			n, _, err = DecodeYAML(data, "c.yaml")
		}
		if err != nil {
			return
		}
		if d := nodeDepth(n); d > MaxDepth {
			t.Fatalf("accepted a document %d deep", d)
		}
		var v any
		if err := json.Unmarshal(n.JSON(), &v); err != nil {
			t.Fatalf("accepted document does not round-trip: %v", err)
		}
		if y, err := yaml.Marshal(v); err == nil && yamlTooDeep(y) >= 0 {
			t.Fatalf("pre-scan refuses encoder output of an accepted document:\n%s", y)
		}
		if at := checkJSONBounds(n.JSON(), "c.json"); at != nil {
			t.Fatalf("JSON bounds refuse an accepted document: %v", at)
		}
	})
}

func nodeDepth(n *Node) int {
	d := 0
	for _, c := range append(n.Items, n.Vals...) {
		d = max(d, nodeDepth(c))
	}
	if n.Kind == Array || n.Kind == Object {
		d++
	}
	return d
}
