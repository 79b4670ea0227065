package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
)

// huge is n bytes of c, a fresh allocation each time (as every decoded
// request's strings are).
func huge(c byte, n int) string { return string(bytes.Repeat([]byte{c}, n)) }

// clipped reports whether s is at most max bytes and the note of its
// length (bounds.Clip's form).
func clipped(s string, max int) bool { return len(s) <= max+len("…(18446744073709551615 bytes)") }

// Whatever a caller sends — a 1 MB tool name, URI, thread, session,
// request id or a denial reason quoting one — a record keeps each field
// within its bound (with the full length noted) and its line within
// MaxRecordBytes.
func TestRecordStaysBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	a, err := New(Options{Enabled: true, Output: path, Detail: DetailFull, UserID: "plain", Slow: 1})
	if err != nil {
		t.Fatal(err)
	}
	const mb = 1 << 20
	ctx := reqid.With(context.Background(), huge('r', mb))
	for _, kind := range []string{ToolCall, PromptGet, ResourceRead} {
		e := a.Start(kind)
		e.Tool, e.RawTool, e.Prompt, e.URI = huge('t', mb), huge('w', mb), huge('p', mb), "file:///"+huge('\x01', mb)
		e.Deny("credentials: " + huge('d', mb))
		e.Arguments(json.RawMessage(`{"a":"`+huge('x', mb)+`"}`), nil)
		a.Finish(ctx, &e, Caller{User: huge('u', mb), Thread: huge('h', mb), Session: huge('s', mb), Protocol: "2025-11-25"}, nil, nil)
	}
	slow, failed := a.Recent()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	for _, l := range lines {
		if len(l) > MaxRecordBytes {
			t.Errorf("a record of %d bytes, bound %d", len(l), MaxRecordBytes)
		}
		var r Record
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not a record: %v", err)
		}
		for field, c := range map[string]struct {
			v   string
			max int
		}{"tool": {r.Tool, bounds.Name}, "raw_tool": {r.RawTool, bounds.Name}, "prompt": {r.Prompt, bounds.Name}, "uri": {r.URI, bounds.URI},
			"thread": {r.Thread, bounds.Thread}, "session": {r.Session, bounds.Session}, "caller": {r.Caller, bounds.User},
			"request_id": {r.RequestID, reqid.MaxLen}, "denial_reason": {r.Denial, bounds.Reason}} {
			if !clipped(c.v, c.max) || !strings.HasSuffix(c.v, "…(1048576 bytes)") && !strings.HasSuffix(c.v, "…(1048584 bytes)") && !strings.HasSuffix(c.v, "…(1048589 bytes)") {
				t.Errorf("%s of %d bytes (%.40q…), want at most %d and its length noted", field, len(c.v), c.v, c.max)
			}
		}
	}
	for _, c := range append(slow, failed...) {
		if !clipped(c.Target, bounds.URI+2*(bounds.Name+32)) || !clipped(c.Denial, bounds.Reason) || !clipped(c.Caller, bounds.User) || !clipped(c.RequestID, reqid.MaxLen) {
			t.Errorf("a recent call keeps %d, %d, %d, %d bytes of target, denial, caller, request id", len(c.Target), len(c.Denial), len(c.Caller), len(c.RequestID))
		}
	}
}

// A denial reason that quotes the caller's id (a credentials denial does)
// shows it as the record shows the caller: hashed, or not at all.
func TestDenialHidesPlainUser(t *testing.T) {
	const user = "alice-the-caller-7731"
	for _, mode := range []string{"hashed", "none", "plain"} {
		path := filepath.Join(t.TempDir(), "a.jsonl")
		a, err := New(Options{Enabled: true, Output: path, UserID: mode})
		if err != nil {
			t.Fatal(err)
		}
		e := a.Start(ToolCall)
		e.Tool = "web_echo"
		e.Deny("credentials: No credential is configured for your account (user id '" + user + "') on MCP server 'web'.")
		a.Finish(context.Background(), &e, Caller{User: user}, nil, nil)
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		recs := readRecords(t, path)
		raw, _ := os.ReadFile(path)
		if shown := strings.Contains(string(raw), user); shown != (mode == "plain") {
			t.Errorf("user_id %s: the plain user id is in the record: %v\n%s", mode, shown, raw)
		}
		if len(recs) != 1 || !strings.Contains(recs[0]["denial_reason"].(string), "on MCP server 'web'") {
			t.Errorf("user_id %s: denial = %v", mode, recs)
		}
	}
}

// fifo is a named pipe at path with a reader that reads nothing until
// drain: an output nobody reads (stdout piped to a stuck process).
type fifo struct {
	r *os.File
}

func newFIFO(t *testing.T, path string) *fifo {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &fifo{r: r}
}

// drain reads the pipe until its writer closes it; the returned channel
// closes when it has.
func (f *fifo) drain() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(io.Discard, f.r)
		_ = f.r.Close()
	}()
	return done
}

// heapAlloc is the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// An output nobody reads holds the writer; the queue then keeps at most
// its byte bound, and the records past it are dropped and counted, however
// large the caller makes them.
func TestBlockedOutputHoldsItsBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stuck")
	f := newFIFO(t, path)
	a, err := New(Options{Enabled: true, Output: path})
	if err != nil {
		t.Fatal(err)
	}
	before := heapAlloc()
	for range 1000 {
		e := a.Start(ResourceRead)
		e.URI = "file:///" + huge('x', 64<<10)
		a.Finish(context.Background(), &e, Caller{Thread: huge('h', 64<<10)}, nil, nil)
	}
	grown := int64(heapAlloc()) - int64(before)
	dropped := value(a.w.dropped)
	t.Logf("1000 records of 128 KB callers' values to an output nobody reads: heap +%d MiB, %v dropped", grown>>20, dropped)
	if grown > 16<<20 || dropped == 0 {
		t.Errorf("heap grew %d MiB (bound 16), %v records dropped (want some)", grown>>20, dropped)
	}
	done := f.drain()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	<-done
}

// FuzzRecordBound: whatever strings a caller sends (repeated up to 64 Ki
// times), a record's line is valid JSON, one line, within MaxRecordBytes.
func FuzzRecordBound(f *testing.F) {
	f.Add("web_echo", "file:///x?token=y", "t1", "s1", "alice", "credentials: (user id 'alice')", uint16(1))
	f.Add("\x00\xff<>&", "\x01", "\u2028", "\"", "\\", "é", uint16(65535))
	f.Fuzz(func(t *testing.T, name, uri, thread, session, user, reason string, times uint16) {
		rep := func(s string) string { return strings.Repeat(s, int(times)%(64<<10)+1) }
		mode := []string{"plain", "hashed", "none"}[int(times)%3]
		a, err := New(Options{UserID: mode, Slow: time.Nanosecond}) // kept as slow, so Finish shapes it as for writing
		if err != nil {
			t.Fatal(err)
		}
		e := a.Start(ToolCall)
		e.Tool, e.RawTool, e.Prompt, e.URI = rep(name), rep(name), rep(name), rep(uri)
		e.Deny(rep(reason))
		a.Finish(reqid.With(context.Background(), rep(session)), &e, Caller{User: rep(user), Thread: rep(thread), Session: rep(session), Protocol: rep(name)}, nil, nil)
		line, err := encode(a.shape(&e))
		if err != nil {
			t.Fatal(err)
		}
		if len(line) > MaxRecordBytes || !json.Valid(line) || bytes.IndexByte(line, '\n') != len(line)-1 {
			t.Fatalf("a record line of %d bytes (bound %d), valid %v", len(line), MaxRecordBytes, json.Valid(line))
		}
	})
}

// The worst record a caller can cause: every string it chooses at its
// bound and made of control characters (six bytes each once escaped), and
// arguments at MaxArgumentBytes, still fits MaxRecordBytes.
func TestWorstRecordFits(t *testing.T) {
	a, err := New(Options{UserID: "plain", Slow: time.Nanosecond, Detail: DetailFull})
	if err != nil {
		t.Fatal(err)
	}
	ctl := func(n int) string { return huge('\x01', n) }
	e := a.Start(ToolCall)
	e.Server = ctl(1 << 20)
	e.Tool, e.RawTool, e.Prompt, e.URI = ctl(1<<20), ctl(1<<20), ctl(1<<20), ctl(1<<20)
	e.Deny(ctl(1 << 20))
	args := `{"a":"` + strings.Repeat(`\u0001`, (MaxArgumentBytes-8)/6) + `"}`
	e.Arguments(json.RawMessage(args), nil)
	a.Finish(reqid.With(context.Background(), ctl(1<<20)), &e,
		Caller{User: ctl(1 << 20), Thread: ctl(1 << 20), Session: ctl(1 << 20), Protocol: ctl(1 << 20)}, nil, errors.New("x"))
	line, err := encode(a.shape(&e))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the worst record: %d bytes (arguments %d), bound %d", len(line), len(e.args), MaxRecordBytes)
	if len(line) > MaxRecordBytes || len(a.shape(&e).Arguments) == 0 {
		t.Errorf("the worst record is %d bytes, bound %d (arguments kept: %v)", len(line), MaxRecordBytes, len(a.shape(&e).Arguments) > 0)
	}
}

// Close does not wait for ever on an output nobody reads: past its wait it
// returns, saying what was not written.
func TestCloseGivesUpOnAStuckOutput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stuck")
	f := newFIFO(t, path)
	a, err := New(Options{Enabled: true, Output: path})
	if err != nil {
		t.Fatal(err)
	}
	a.w.closeWait = 50 * time.Millisecond
	for range 300 { // 2.4 MB: past the pipe's and the writer's buffers
		e := a.Start(ResourceRead)
		e.URI = "file:///" + huge('x', 8<<10)
		a.Finish(context.Background(), &e, Caller{}, nil, nil)
	}
	err = a.Close()
	if err == nil || !strings.Contains(err.Error(), "did not take the queued records within 50ms") {
		t.Errorf("Close = %v", err)
	}
	drained := f.drain() // the writer finishes what is queued
	<-a.w.done
	_ = a.w.file.Close()
	<-drained
}
