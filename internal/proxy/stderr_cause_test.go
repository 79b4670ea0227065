package proxy_test

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/status"
)

// TestStdioStartupFailureCause: a stdio server whose process writes to
// stderr and exits at start has a cause naming its last stderr line
// (scrubbed of the credentials in its env), and a reason that carries the
// line once with its count however many times it was retried (issue 39:
// no cause, and the same line up to 20 times in the reason).
func TestStdioStartupFailureCause(t *testing.T) {
	const token = "tok-3c4d5e6f7a8b"
	m := startMux(t, `{"mcpServers": {"dies": {"type": "stdio", "command": "/bin/sh",
		"args": ["-c", "echo starting >&2; echo \"Error: cannot find module foo (token $API_TOKEN)\" >&2; exit 1"],
		"env": {"API_TOKEN": "`+token+`"}}}}`, proxy.Options{})
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(m.logs.String(), "upstream still unavailable") < 4 { // five attempts
		if time.Now().After(deadline) {
			t.Fatalf("not retried four times:\n%s", m.logs)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with a deadline
	}
	s := m.srv.Status().Servers[0]
	if c := regexp.MustCompile(`foo \(token [^)]*\) \(×(\d+)\)$`).FindStringSubmatch(s.Reason); c == nil || atoi(c[1]) < 5 {
		t.Errorf("reason = %q, want the last line once with its count of at least 5", s.Reason)
	}
	if s.State != status.Retrying {
		t.Errorf("state %q, want retrying", s.State)
	}
	if !strings.Contains(s.Cause, "(stderr: Error: cannot find module foo (token ") || !strings.HasPrefix(s.Cause, "the server process exited") {
		t.Errorf("cause = %q, want the exit and the last stderr line", s.Cause)
	}
	if strings.Contains(s.Reason+s.Cause, token) {
		t.Errorf("the env's token reached the status: %+v", s)
	}
	if n := strings.Count(s.Reason, "cannot find module foo"); n != 1 {
		t.Errorf("the stderr line is %d times in the reason, want once: %q", n, s.Reason)
	}
	if n := strings.Count(s.Reason, "starting"); n != 1 {
		t.Errorf("the first stderr line is %d times in the reason, want once: %q", n, s.Reason)
	}
	if len(s.Reason) > 300 {
		t.Errorf("reason is %d bytes: %q", len(s.Reason), s.Reason)
	}
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
