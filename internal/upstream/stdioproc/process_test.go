package stdioproc_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/upstream/stdioproc"
)

// TestMain fails the package's tests when one leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A process whose stdout lines nobody reads (a probe given up, a session
// never connected) is stopped: the stdout reader, blocked handing over a
// line, ends with it instead of waiting forever.
func TestStopEndsTheUnreadStdoutReader(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	// Two JSON lines, then wait for stdin to close: the reader takes the
	// first and blocks handing it over; nothing ever receives it.
	p, err := stdioproc.Start(&stdioproc.Options{Command: "/bin/sh", Args: []string{"-c", `echo '{"a":1}'; echo '{"b":2}'; exec cat >/dev/null`}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Stop()
}
