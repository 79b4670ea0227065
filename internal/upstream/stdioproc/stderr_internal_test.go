package stdioproc

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
	if len(tail) != stderrKeep || tail[0] != fmt.Sprintf("line %d", 50-stderrKeep) || tail[stderrKeep-1] != "line 49" {
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

// TestStderrTailDeduplicated: a line written again is kept once, moved to
// the end with its count, so the same start-up failure repeated on every
// retry (a one-line error or a traceback) is one block, and the tail is
// bounded in lines and characters, newest kept (issue 39).
func TestStderrTailDeduplicated(t *testing.T) {
	l := NewStderrLog(hclog.NewNullLogger(), nil, nil)
	w := l.Writer(false)
	for range 30 { // thirty attempts, each a three-line traceback
		fmt.Fprint(w, "Traceback:\n  File x.py\nImportError: no module y\n")
	}
	fmt.Fprint(w, "once\n")
	want := []string{"Traceback: (×30)", "  File x.py (×30)", "ImportError: no module y (×30)", "once"}
	if got := l.Tail(); !slices.Equal(got, want) {
		t.Errorf("tail = %q, want %q", got, want)
	}
	if got := l.Last(); got != "once" {
		t.Errorf("last = %q", got)
	}

	l = NewStderrLog(hclog.NewNullLogger(), nil, nil)
	w = l.Writer(false)
	for i := range 50 {
		fmt.Fprintf(w, "%03d %s\n", i, strings.Repeat("x", 296)) // 300 characters
	}
	got := l.Tail()
	if len(got) != 3 || !strings.HasPrefix(got[2], "049 ") || utf8.RuneCountInString(strings.Join(got, "")) > StderrTailMax {
		t.Errorf("tail of long lines: %d lines, %d characters, last %.4q", len(got), utf8.RuneCountInString(strings.Join(got, "")), got[len(got)-1])
	}
	for range 3 {
		fmt.Fprintf(w, "%s\n", strings.Repeat("é", stderrLineMax)) // one line past the bound
	}
	got = l.Tail()
	if len(got) != 1 || utf8.RuneCountInString(got[0]) != StderrTailMax || !strings.HasSuffix(got[0], "é… (×3)") {
		t.Errorf("a line longer than the bound: %d lines, %d characters, ends %q", len(got), utf8.RuneCountInString(got[0]), got[0][len(got[0])-12:])
	}
}
