package stdioproc

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

func TestStderrRateLimitAndTail(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	clock := time.Unix(1000, 0)
	var quiet bool
	l := NewStderrLog(hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}), func() bool { return quiet }, nil)
	l.now = func() time.Time { return clock }
	w := l.Writer(false)
	for i := range 50 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if n := strings.Count(logs.String(), "[DEBUG] line "); n != stderrBurst {
		t.Errorf("logged %d lines in one second, want %d", n, stderrBurst)
	}
	if strings.Contains(logs.String(), "[INFO]") || strings.Contains(logs.String(), "[WARN]") {
		t.Errorf("stderr logged above debug:\n%s", logs)
	}
	tail := l.Tail()
	if len(tail) != stderrKeep || tail[0] != "line 30" || tail[stderrKeep-1] != "line 49" {
		t.Errorf("tail = %q", tail)
	}
	clock = clock.Add(time.Second)
	_, _ = w.Write([]byte("after\n"))
	if !strings.Contains(logs.String(), "dropped=30") || !strings.Contains(logs.String(), "[DEBUG] after") {
		t.Errorf("next second: want the dropped count and the line:\n%s", logs)
	}
	quiet = true // retrying: kept, not logged
	_, _ = w.Write([]byte("while retrying\n"))
	if strings.Contains(logs.String(), "while retrying") {
		t.Error("stderr logged while retrying")
	}
	if tail := l.Tail(); tail[len(tail)-1] != "while retrying" {
		t.Errorf("tail = %q", tail)
	}
}
