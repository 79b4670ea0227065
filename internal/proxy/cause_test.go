package proxy

import (
	"errors"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// TestErrorCause: a discovery error's cause is its last part outside
// quotes, with a stdio server's last stderr line (issue 19), also when the
// error is a single part (issue 39: a process that exits at start).
func TestErrorCause(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want string
	}{
		{errors.New(`initialize: calling "initialize": sending "initialize": rejected by transport: Post "http://127.0.0.1:1/mcp": dial tcp 127.0.0.1:1: connect: connection refused`), "connection refused"},
		{errors.New(`calling "tools/list": server said "bad: input"`), `server said "bad: input"`},
		{&upstream.StderrError{Err: errors.New(`initialize: calling "initialize": EOF`), Lines: []string{"starting", "python3: No module named x | y (×3)"}, Last: "python3: No module named x | y"},
			"EOF (stderr: python3: No module named x | y)"},
		{&upstream.StderrError{Err: errors.New("the server process exited before reading its first message"), Lines: []string{"boom (×20)"}, Last: "boom"},
			"the server process exited before reading its first message (stderr: boom)"},
		{errors.New(`tool discovery timed out after 5s`), ""},
	} {
		if got := errorCause(tt.err); got != tt.want {
			t.Errorf("errorCause(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
