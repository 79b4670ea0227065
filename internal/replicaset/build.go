package replicaset

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// modulePkg is the mcp-mux command's import path.
const modulePkg = "github.com/mcp-mux/mcp-mux/cmd/mcp-mux"

// Build builds the mcp-mux binary into dir (with -race when the calling
// test binary has it) and returns its path. Call it once, from TestMain.
func Build(dir string) (string, error) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	out := filepath.Join(dir, "mcp-mux")
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, modulePkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build %s: %w", modulePkg, err)
	}
	return out, nil
}

// noExitSleep stops race-enabled binaries from sleeping a second at exit.
const noExitSleep = "atexit_sleep_ms=0"

// baseEnv is the test process's environment without the mux's own
// variables, with GORACE's exit sleep off.
func baseEnv() []string {
	var out []string
	gorace := noExitSleep
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "MCP_MUX_"):
			continue
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + noExitSleep
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GORACE="+gorace)
}
