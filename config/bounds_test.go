package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// nestedJSON is a server whose extra key holds leaf nested depth objects
// deep (the server entry itself adds three levels above it).
func nestedJSON(depth int, leaf string) []byte {
	v := strings.Repeat(`{"a":`, depth) + `"` + leaf + `"` + strings.Repeat("}", depth)
	return []byte(`{"mcpServers": {"x": {"command": "echo", "extra": ` + v + `}}}`)
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func wantTooDeep(t *testing.T, err error, pos string) {
	t.Helper()
	var se *SyntaxError
	if !errors.As(err, &se) || !strings.Contains(se.Msg, "deeper than 64 levels, the bound on config nesting") {
		t.Fatalf("err = %v, want the nesting bound named", err)
	}
	if pos != "" && !strings.Contains(se.Error(), pos) {
		t.Errorf("err = %v, want position %s", err, pos)
	}
}

// Issue 17 attack 9: a 20 KB value nested 9,990 deep cost 1.37 GB and 9.3 s
// when written through the admin API, and the file it left cost 611 MB at
// every load. The bound is checked on the raw bytes, before any tree.
func TestParseRefusesDeepNesting(t *testing.T) {
	deep := nestedJSON(100_000, strings.Repeat("v", 20_000))
	var err error
	if n := allocated(func() { _, err = Parse(deep, LoadOptions{Filename: "c.json"}) }); n > 1<<20 {
		t.Errorf("refusing a 100k-deep file allocated %d bytes", n)
	}
	wantTooDeep(t, err, "c.json:1:")
	var dups []dupKey
	if n := allocated(func() { _, dups, err = decodeJSON(deep, "request body") }); n > 1<<20 || dups != nil {
		t.Errorf("refusing a 100k-deep body allocated %d bytes", n)
	}
	wantTooDeep(t, err, "request body:1:")

	// An admin PUT decodes its body with the same decoder.
	body := `{"mcp_servers": {"x": {"command": "echo", "extra": ` + strings.Repeat(`[`, 9_990) + strings.Repeat(`]`, 9_990) + `}}}`
	if _, _, err := ReplaceServers([]byte(`{"mcpServers": {}}`), "c.json", []byte(body)); err == nil || !strings.Contains(err.Error(), "deeper than 64 levels") {
		t.Errorf("ReplaceServers: %v", err)
	}

	yamlDeep := "mcpServers:\n  x:\n    extra: " + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "\n"
	if n := allocated(func() { _, err = Parse([]byte(yamlDeep), LoadOptions{Filename: "c.yaml"}) }); n > 1<<20 {
		t.Errorf("refusing a 100k-deep YAML file allocated %d bytes", n)
	}
	wantTooDeep(t, err, "c.yaml:3:")
}

func TestParseWithinBounds(t *testing.T) {
	// 60 levels under the server (63 in all) with a 1 MB value parse.
	big := strings.Repeat("v", 1<<20)
	cfg, err := Parse(nestedJSON(60, big), LoadOptions{Filename: "c.json"})
	if err != nil || len(cfg.Servers) != 1 || len(cfg.Servers[0].Extra["extra"]) < 1<<20 {
		t.Fatalf("60-deep value: %v", err)
	}
	cfg, err = Parse(nestedJSON(61, "v"), LoadOptions{Filename: "c.json"})
	if err != nil || len(cfg.Servers) != 1 {
		t.Fatalf("64 levels in all: %v", err)
	}
	_, err = Parse(nestedJSON(62, "v"), LoadOptions{Filename: "c.json"})
	wantTooDeep(t, err, "c.json:1:")

	var v any = big
	for range 60 {
		v = map[string]any{"a": v}
	}
	doc, err := yaml.Marshal(map[string]any{"mcpServers": map[string]any{"x": map[string]any{"command": "echo", "extra": v}}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err := Parse(doc, LoadOptions{Filename: "c.yaml"}); err != nil || len(cfg.Servers) != 1 {
		t.Fatalf("60-deep YAML value: %v", err)
	}
}

func TestParseRefusesLargeFile(t *testing.T) {
	doc := []byte(`{"mcpServers": {}, "pad": "` + strings.Repeat("a", MaxFileSize) + `"}`)
	_, err := Parse(doc, LoadOptions{Filename: "c.json"})
	var se *SyntaxError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "over the 4194304-byte (4 MiB) bound on config size") {
		t.Errorf("Parse: %v", err)
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path, LoadOptions{}); err == nil || !strings.Contains(err.Error(), "c.yaml: the config is larger than the 4194304-byte (4 MiB) bound on config size") {
		t.Errorf("Load: %v", err)
	}
}

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
			n   *node
			err error
		)
		if isJSON {
			n, _, err = decodeJSON(data, "c.json")
		} else {
			n, _, err = decodeYAML(data, "c.yaml")
		}
		if err != nil {
			return
		}
		if d := nodeDepth(n); d > MaxDepth {
			t.Fatalf("accepted a document %d deep", d)
		}
		var v any
		if err := json.Unmarshal(rawJSON(n), &v); err != nil {
			t.Fatalf("accepted document does not round-trip: %v", err)
		}
		if y, err := yaml.Marshal(v); err == nil && yamlTooDeep(y) >= 0 {
			t.Fatalf("pre-scan refuses encoder output of an accepted document:\n%s", y)
		}
		if at := checkJSONBounds(rawJSON(n), "c.json"); at != nil {
			t.Fatalf("JSON bounds refuse an accepted document: %v", at)
		}
	})
}

func nodeDepth(n *node) int {
	d := 0
	for _, c := range append(n.items, n.vals...) {
		d = max(d, nodeDepth(c))
	}
	if n.kind == kindArray || n.kind == kindObject {
		d++
	}
	return d
}
