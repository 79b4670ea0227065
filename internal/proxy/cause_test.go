package proxy

import (
	"errors"
	"testing"
)

// TestErrorCause: a discovery error's cause is its last part outside
// quotes, with a stdio server's last stderr line (issue 19).
func TestErrorCause(t *testing.T) {
	for _, tt := range []struct{ err, want string }{
		{`initialize: calling "initialize": sending "initialize": rejected by transport: Post "http://127.0.0.1:1/mcp": dial tcp 127.0.0.1:1: connect: connection refused`, "connection refused"},
		{`calling "tools/list": server said "bad: input"`, `server said "bad: input"`},
		{`initialize: calling "initialize": EOF; stderr: starting | python3: No module named x`, "EOF (stderr: python3: No module named x)"},
		{`tool discovery timed out after 5s`, ""},
	} {
		if got := errorCause(errors.New(tt.err)); got != tt.want {
			t.Errorf("errorCause(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
