package upstream

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

func TestBackoffSchedule(t *testing.T) {
	lo := backoff{min: time.Second, max: 60 * time.Second, jitter: func(int64) int64 { return 0 }}
	hi := backoff{min: time.Second, max: 60 * time.Second, jitter: func(n int64) int64 { return n - 1 }}
	wantLo := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second,
		16 * time.Second, 30 * time.Second, 30 * time.Second}
	for i, w := range wantLo {
		if got := lo.next(); got != w {
			t.Errorf("wait %d, lowest jitter: %s, want %s", i+1, got, w)
		}
		d := min(time.Second<<i, 60*time.Second)
		if got := hi.next(); got != d {
			t.Errorf("wait %d, highest jitter: %s, want %s", i+1, got, d)
		}
	}
	lo.reset()
	if got := lo.next(); got != 500*time.Millisecond {
		t.Errorf("after reset: %s, want 500ms", got)
	}
}

func TestStderrRateLimitAndTail(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	clock := time.Unix(1000, 0)
	var quiet bool
	l := newStderrLog(hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}), func() bool { return quiet }, nil)
	l.now = func() time.Time { return clock }
	w := l.writer()
	for i := range 50 {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if n := strings.Count(logs.String(), "[DEBUG] line "); n != stderrBurst {
		t.Errorf("logged %d lines in one second, want %d", n, stderrBurst)
	}
	if strings.Contains(logs.String(), "[INFO]") || strings.Contains(logs.String(), "[WARN]") {
		t.Errorf("stderr logged above debug:\n%s", logs)
	}
	tail := l.tail()
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
	if tail := l.tail(); tail[len(tail)-1] != "while retrying" {
		t.Errorf("tail = %q", tail)
	}
}
