package api

import (
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Issue 17 attack 9: a PUT of a 20 KB value nested 9,990 deep took 1.37 GB
// and 9.3 s, and wrote a file of hundreds of megabytes that every restart
// parsed again. It is refused on its raw bytes, naming the bound, and
// nothing is written.
func TestAdminPutNestedBounded(t *testing.T) {
	f := startAdmin(t, filepath.Join(t.TempDir(), "c.json"), adminDoc)
	before := f.file()
	const depth = 9_990
	nested := strings.Repeat(`{"a":`, depth) + `"` + strings.Repeat("v", 20_000) + `"` + strings.Repeat("}", depth)
	body := `{"mcp_servers": {"x": {"type": "stdio", "command": "npx", "args": ["pkg"], "extra": ` + nested + `}}}`

	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	code, res := f.do("PUT", "/api/mcp/config", adminToken, body)
	runtime.ReadMemStats(&m1)
	if code != http.StatusBadRequest || !strings.Contains(detail(t, res), "deeper than 64 levels, the bound on config nesting") {
		t.Errorf("nested PUT: %d %s", code, res)
	}
	if n := m1.TotalAlloc - m0.TotalAlloc; n > 16<<20 {
		t.Errorf("refusing the nested PUT allocated %d bytes", n)
	}
	if f.file() != before || f.reloads != 0 {
		t.Errorf("a refused PUT changed the file or reloaded (%d)", f.reloads)
	}

	// Within the bound the same shape is accepted, and the file written is
	// a small multiple of the body, not its square.
	nested = strings.Repeat(`{"a":`, 60) + `"v"` + strings.Repeat("}", 60)
	body = `{"mcp_servers": {"x": {"type": "stdio", "command": "npx", "args": ["pkg"], "extra": ` + nested + `}}}`
	if code, res := f.do("PUT", "/api/mcp/config", adminToken, body); code != http.StatusOK {
		t.Fatalf("60-deep PUT: %d %s", code, res)
	}
	if n := len(f.file()); n > 20*len(body) {
		t.Errorf("a %d-byte body wrote a %d-byte file", len(body), n)
	}
}
