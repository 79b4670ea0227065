package replicaset

import (
	"path/filepath"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// modulePkg is the mcp-mux command's import path.
const modulePkg = "github.com/mcp-mux/mcp-mux/cmd/mcp-mux"

// Build builds the mcp-mux binary into dir (with -race when the calling
// test binary has it) and returns its path. Call it once, from TestMain.
func Build(dir string) (string, error) {
	out := filepath.Join(dir, "mcp-mux")
	if err := mcptest.GoBuild(out, modulePkg, raceEnabled); err != nil {
		return "", err
	}
	return out, nil
}
