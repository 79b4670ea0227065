package mcptest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// LogWaiter is a concurrency-safe buffer for a process's output that wakes
// waiters on every write (a started mcp-mux's stderr, say).
type LogWaiter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

// NewLogWaiter returns an empty LogWaiter.
func NewLogWaiter() *LogWaiter { return &LogWaiter{changed: make(chan struct{})} }

func (b *LogWaiter) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	return b.buf.Write(p)
}

func (b *LogWaiter) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// WaitFor blocks until pred holds for the buffer's contents, done is
// closed, or the timeout passes; it returns pred's last result.
func (b *LogWaiter) WaitFor(timeout time.Duration, done <-chan struct{}, pred func(string) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		b.mu.Lock()
		s, changed := b.buf.String(), b.changed
		b.mu.Unlock()
		if pred(s) {
			return true
		}
		select {
		case <-changed:
		case <-done:
			return pred(b.String())
		case <-deadline.C:
			return false
		}
	}
}

// LogLines decodes the JSON log lines in s, skipping anything else.
func LogLines(s string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// FindLogs returns the JSON log lines in s with the given message.
func FindLogs(s, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range LogLines(s) {
		if l["@message"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// GoBuild builds the package pkg into out with the go command of the
// running toolchain, with -race when race is set.
func GoBuild(out, pkg string, race bool, flags ...string) error {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	args := append([]string{"build", "-o", out}, flags...)
	if race {
		args = append(args, "-race")
	}
	cmd := exec.Command(goBin, append(args, pkg)...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	return nil
}

// NoExitSleep (GORACE) stops race-enabled binaries from sleeping a second at exit.
const NoExitSleep = "atexit_sleep_ms=0"

// BaseEnv is the test process's environment for a child mcp-mux: without
// the mux's own MCP_MUX_* variables, with GORACE's exit sleep off.
func BaseEnv() []string {
	var out []string
	gorace := NoExitSleep
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "MCP_MUX_"):
			continue
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + NoExitSleep
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GORACE="+gorace)
}
