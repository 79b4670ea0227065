package config

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
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
	var dups []rawdoc.DupKey
	if n := allocated(func() { _, dups, err = rawdoc.DecodeJSON(deep, "request body") }); n > 1<<20 || dups != nil {
		t.Errorf("refusing a 100k-deep body allocated %d bytes", n)
	}
	wantTooDeep(t, err, "request body:1:")

	// An admin PUT's body: config/edit's TestReplaceServersDepthBound.

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
