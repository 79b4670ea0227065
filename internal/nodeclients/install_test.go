package nodeclients_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/nodeclients"
)

// TestInstallPinsVersions checks that npm ci installed exactly the pinned
// versions the lock file names.
func TestInstallPinsVersions(t *testing.T) {
	dir := nodeclients.Install(t)
	for pkg, want := range map[string]string{
		"@modelcontextprotocol/sdk":               "1.32.2",
		"@modelcontextprotocol/client":            "2.4.0",
		"@modelcontextprotocol/server-everything": "2026.8.31",
	} {
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", pkg, "package.json"))
		if err != nil {
			t.Fatalf("%s not installed: %v", pkg, err)
		}
		var p struct{ Version string }
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatal(err)
		}
		if p.Version != want {
			t.Errorf("%s: installed %s, want %s", pkg, p.Version, want)
		}
	}
	if _, err := os.Stat(nodeclients.Script(t, "everything.mjs")); err != nil {
		t.Error(err)
	}
}
