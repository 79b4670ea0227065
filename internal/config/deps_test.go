package config

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPlainData pins config as plain data: it imports no package of this
// module except leaves, and neither net/http nor OAuth.
func TestPlainData(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{
		"github.com/mcp-mux/mcp-mux/internal/config":      true,
		"github.com/mcp-mux/mcp-mux/internal/headercheck": true,
		"github.com/mcp-mux/mcp-mux/internal/secret":      true,
		// A leaf: the JSON depth scan that bounds a load before decoding.
		"github.com/mcp-mux/mcp-mux/internal/wire": true,
		// config's own decoder of the document as written.
		"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc": true,
		// A leaf: policy.rules' CEL conditions, compiled (pure, no I/O) so
		// that one that does not compile fails the load.
		"github.com/mcp-mux/mcp-mux/internal/policy": true,
	}
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/mcp-mux/mcp-mux/") && !allowed[dep] {
			t.Errorf("config imports %s; it must stay plain data (DESIGN §1)", dep)
		}
		if dep == "net/http" || strings.HasPrefix(dep, "golang.org/x/oauth2") {
			t.Errorf("config imports %s", dep)
		}
	}
}
