package taskpoll

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// remote is a scripted task server behind the Caller boundary: answer
// decides each call's result. (End-to-end tests in proxy and cmd use real
// MCP servers.)
type remote struct {
	mu     sync.Mutex
	calls  []Call
	at     []time.Time
	answer func(c Call, n int) (json.RawMessage, error) // n: calls of this tool so far
}

func (r *remote) CallTool(_ context.Context, c Call) (json.RawMessage, error) {
	r.mu.Lock()
	n := 0
	for _, p := range r.calls {
		if p.Tool == c.Tool {
			n++
		}
	}
	r.calls = append(r.calls, c)
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
	return r.answer(c, n)
}

func (r *remote) count(tool string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.calls {
		if c.Tool == tool {
			n++
		}
	}
	return n
}

func sc(v string) json.RawMessage {
	return json.RawMessage(`{"content":[{"type":"text","text":"ignored"}],"structuredContent":` + v + `}`)
}

func toolErr(text string) json.RawMessage {
	b, _ := json.Marshal(text)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(b) + `}],"isError":true}`)
}

var triple = Toolset{Name: "report", SubmitTool: "submit", StatusTool: "status", CancelTool: "cancel"}

func newService(t *testing.T, st Store, r Caller, cfg Config) *Service {
	t.Helper()
	s, err := New(Options{Store: st, Caller: r, Config: cfg, Jitter: func(d time.Duration) time.Duration { return d }})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func boltStore(t *testing.T) Store { s, _ := boltReplicas(t); return s }

func submitOK(rid string) func(context.Context) (json.RawMessage, error) {
	return func(context.Context) (json.RawMessage, error) {
		return sc(`{"task_id":"` + rid + `","status":"running"}`), nil
	}
}

func submitted(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var r struct {
		SC struct {
			TaskID   string `json:"task_id"`
			TaskName string `json:"task_name"`
			Status   string `json:"status"`
			Message  string `json:"message"`
		} `json:"structuredContent"`
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(raw, &r); err != nil || r.IsError || r.SC.Status != "submitted" || r.SC.TaskName != "report" || r.SC.Message != SubmitMessage || !ValidID(r.SC.TaskID) {
		t.Fatalf("submit result %s", raw)
	}
	if strings.Contains(string(raw), "r-") {
		t.Fatalf("the remote id leaked: %s", raw)
	}
	return r.SC.TaskID
}

func TestDriverProtocol(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		cancel    bool
		want      Status
		err       string
		transient bool
	}{
		{"running maps to working", `{"structuredContent":{"task_id":"r","status":"running"}}`, false, StatusWorking, "", false},
		{"completed with result and artifact", `{"structuredContent":{"task_id":"r","status":"completed","result":{"x":1},"result_artifact":{"uri":"u","mime_type":"m"}}}`, false, StatusCompleted, "", false},
		{"text content is not parsed", `{"content":[{"type":"text","text":"{\"task_id\":\"r\",\"status\":\"completed\"}"}]}`, false, "", "MCP task tool 'status' must return structuredContent; text content is not parsed", false},
		{"tool error keeps bounded first text", `{"content":[{"type":"text","text":"  ` + strings.Repeat("x", 600) + `"}],"isError":true}`, false, "", "MCP task tool 'status' returned an error: " + strings.Repeat("x", 500), true},
		{"input_required needs payload", `{"structuredContent":{"task_id":"r","status":"input_required"}}`, false, "", "Invalid structuredContent from MCP task tool 'status': status input_required needs an input_required payload", false},
		{"input_required pollable", `{"structuredContent":{"task_id":"r","status":"input_required","input_required":{"q":"?"}}}`, false, StatusInputRequired, "", false},
		{"non-positive poll_after rejected", `{"structuredContent":{"task_id":"r","status":"running","poll_after_seconds":0}}`, false, "", "Invalid structuredContent from MCP task tool 'status': poll_after_seconds must be a finite positive number", false},
		{"task_not_found is a failure", `{"structuredContent":{"task_id":"r","status":"running","error_code":"task_not_found"}}`, false, StatusFailed, "", false},
		{"mismatched id", `{"structuredContent":{"task_id":"other","status":"running"}}`, false, "", "MCP task response task_id does not match the persisted remote task: expected 'r', got 'other'", false},
		{"unknown status", `{"structuredContent":{"task_id":"r","status":"paused"}}`, false, "", "Invalid structuredContent from MCP task tool 'status': unknown status 'paused'", false},
		{"cancel must be terminal", `{"structuredContent":{"task_id":"r","status":"running"}}`, true, "", "Invalid structuredContent from MCP task tool 'status': a cancel answer's status must be cancelled, completed or failed", false},
		{"cancel reports the actual terminal status", `{"structuredContent":{"task_id":"r","status":"completed"}}`, true, StatusCompleted, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseStatus("status", "r", json.RawMessage(tc.raw), tc.cancel)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err = %v, want %s", err, tc.err)
				}
				if isProtocol(err) == tc.transient {
					t.Fatalf("transient = %v", !isProtocol(err))
				}
				return
			}
			if err != nil || s.Status != tc.want {
				t.Fatalf("%v %+v", err, s)
			}
		})
	}
	s, _ := parseStatus("status", "r", json.RawMessage(`{"structuredContent":{"task_id":"r","status":"running","error_code":"task_not_found"}}`), false)
	if s.Error != "Remote MCP task was not found" {
		t.Fatalf("task_not_found error %q", s.Error)
	}
	s, _ = parseStatus("status", "r", json.RawMessage(`{"structuredContent":{"task_id":"r","status":"running","poll_after_seconds":1e20}}`), false)
	if s.PollAfter != 24*time.Hour {
		t.Fatalf("1e20 poll_after = %v", s.PollAfter)
	}
	if _, err := parseSubmit("submit", sc(`{"task_id":"","status":"running"}`)); !isProtocol(err) {
		t.Fatalf("empty remote id: %v", err)
	}
}

func TestScheduling(t *testing.T) {
	s := newService(t, boltStore(t), &remote{}, Config{MaxPollBackoff: 30 * time.Second})
	now := t0
	tk := newTask("u", "th", now)
	n := s.applySnapshot(tk.Clone(), &snapshot{Status: StatusWorking}, now)
	if !n.NextPollAt.Equal(now.Add(5*time.Second)) || n.Version != 1 {
		t.Fatalf("+poll_interval: %v v%d", n.NextPollAt.Sub(now), n.Version)
	}
	n = s.applySnapshot(n, &snapshot{Status: StatusWorking, PollAfter: 24 * time.Hour}, now)
	if !n.NextPollAt.Equal(now.Add(24*time.Hour)) || n.Version != 1 {
		t.Fatalf("1-day hint: %v (no status change, no event: v%d)", n.NextPollAt.Sub(now), n.Version)
	}
	n = s.applySnapshot(n, &snapshot{Status: StatusInputRequired, InputRequired: json.RawMessage(`{}`)}, now)
	if !n.NextPollAt.Equal(now.Add(60 * time.Second)) {
		t.Fatalf("input_required >= 60s: %v", n.NextPollAt.Sub(now))
	}
	if got := s.backoff(0); got != 5*time.Second {
		t.Fatalf("0 errors: %v", got)
	}
	if got := s.backoff(4); got != 30*time.Second {
		t.Fatalf("4 errors, cap 30: %v", got)
	}
	x := tk.Clone()
	for i := range 3 {
		x = s.transient(x, errors.New("boom"), now)
		if x.Degraded != (i == 2) {
			t.Fatalf("degraded after %d errors: %v", i+1, x.Degraded)
		}
	}
	if x.Version != 1 || x.LastPollError != "boom" {
		t.Fatalf("degrading is one event: %+v", x)
	}
	x = s.applySnapshot(x, &snapshot{Status: StatusWorking}, now)
	if x.Degraded || x.ConsecutiveErrors != 0 || x.LastPollError != "" {
		t.Fatalf("success resets: %+v", x)
	}
	j := jitter(100 * time.Second)
	if j < 90*time.Second || j > 110*time.Second {
		t.Fatalf("jitter %v", j)
	}
}

func TestPayloadBounds(t *testing.T) {
	p := payloads{maxResultBytes: 1024, previewChars: 64}
	big := `"` + strings.Repeat("é", 2000) + `"`
	var tk Task
	if err := p.normalize(&snapshot{Result: json.RawMessage(big)}, &tk); err != nil {
		t.Fatal(err)
	}
	if tk.Result != nil || !tk.ResultTruncated || tk.ResultPreview != strings.Repeat("é", 64) {
		t.Fatalf("oversized string result: %+v", tk)
	}
	obj := `{"a": "` + strings.Repeat("x", 2000) + `"}`
	_ = p.normalize(&snapshot{Result: json.RawMessage(obj)}, &tk)
	if tk.Result != nil || tk.ResultPreview != `{"a":"`+strings.Repeat("x", 58) {
		t.Fatalf("oversized object preview %q", tk.ResultPreview)
	}
	_ = p.normalize(&snapshot{Result: json.RawMessage(`{ "a" : 1 }`)}, &tk)
	if string(tk.Result) != `{"a":1}` || tk.ResultTruncated {
		t.Fatalf("small result %s", tk.Result)
	}
	huge := json.RawMessage(`{"a":"` + strings.Repeat("x", MaxPayloadBytes) + `"}`)
	if err := p.normalize(&snapshot{InputRequired: huge}, &tk); err == nil || err.Error() != "MCP task input_required payload exceeds the 65536-byte limit" {
		t.Fatalf("input_required: %v", err)
	}
	if err := p.normalize(&snapshot{Artifact: huge}, &tk); err == nil || err.Error() != "MCP task result_artifact payload exceeds the 65536-byte limit" {
		t.Fatalf("artifact: %v", err)
	}
	_ = p.normalize(&snapshot{Error: strings.Repeat("e", 5000)}, &tk)
	if len(tk.Error) != MaxErrorChars {
		t.Fatalf("error len %d", len(tk.Error))
	}
}

func TestSubmitPersistsBeforeReturning(t *testing.T) {
	st := boltStore(t)
	s := newService(t, st, &remote{}, Config{})
	var seenPending bool
	raw, err := s.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, func(ctx context.Context) (json.RawMessage, error) {
		ts, _ := st.List(ctx, Query{User: "u"})
		seenPending = len(ts) == 1 && ts[0].Status == StatusPending
		return sc(`{"task_id":"r-1","status":"running"}`), nil
	})
	if err != nil || !seenPending {
		t.Fatalf("submit: %v, pending recorded first: %v", err, seenPending)
	}
	id := submitted(t, raw)
	tk, err := s.Get(context.Background(), "u", id)
	if err != nil || tk.RemoteID != "r-1" || tk.Status != StatusSubmitted || tk.Server != "jobs" {
		t.Fatalf("recorded %+v %v", tk, err)
	}
	if _, err := s.Get(context.Background(), "other", id); !errors.Is(err, ErrNotFound) {
		t.Fatal("another user read the task")
	}
}

func TestSubmitCompensation(t *testing.T) {
	ctx := context.Background()
	t.Run("oversized remote id is cancelled remotely", func(t *testing.T) {
		r := &remote{answer: func(Call, int) (json.RawMessage, error) { return sc(`{"task_id":"x","status":"cancelled"}`), nil }}
		s := newService(t, boltStore(t), r, Config{})
		long := strings.Repeat("r", 256)
		_, err := s.Submit(ctx, SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, submitOK(long))
		if err == nil || err.Error() != "MCP task remote_task_id must not exceed 255 characters" || r.count("cancel") != 1 {
			t.Fatalf("%v, cancels %d", err, r.count("cancel"))
		}
		if r.calls[0].Args == nil || !strings.Contains(string(r.calls[0].Args), long) {
			t.Fatal("cancel did not name the remote task")
		}
	})
	t.Run("duplicate handle is not cancelled", func(t *testing.T) {
		r := &remote{answer: func(Call, int) (json.RawMessage, error) { return nil, errors.New("unexpected") }}
		s := newService(t, boltStore(t), r, Config{})
		req := SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}
		if _, err := s.Submit(ctx, req, submitOK("r-1")); err != nil {
			t.Fatal(err)
		}
		_, err := s.Submit(ctx, req, submitOK("r-1"))
		var dup *DuplicateRemoteError
		if !errors.As(err, &dup) || r.count("cancel") != 0 {
			t.Fatalf("%v, cancels %d", err, r.count("cancel"))
		}
	})
	t.Run("a record that cannot be completed is cancelled remotely", func(t *testing.T) {
		rs := mcptest.StartRedis(t, false)
		st := newRedisFor(t, rs.URL(), "comp:")
		r := &remote{answer: func(Call, int) (json.RawMessage, error) { return sc(`{"task_id":"r-1","status":"cancelled"}`), nil }}
		s := newService(t, st, r, Config{})
		_, err := s.Submit(ctx, SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, func(context.Context) (json.RawMessage, error) {
			rs.Stop() // the store goes away while the upstream accepts
			return sc(`{"task_id":"r-1","status":"running"}`), nil
		})
		if err == nil || !strings.Contains(err.Error(), "so it was cancelled") || r.count("cancel") != 1 {
			t.Fatalf("%v, cancels %d", err, r.count("cancel"))
		}
	})
	t.Run("store down before submit: upstream not called", func(t *testing.T) {
		rs := mcptest.StartRedis(t, false)
		st := newRedisFor(t, rs.URL(), "down:")
		rs.Stop()
		s := newService(t, st, &remote{}, Config{})
		called := false
		_, err := s.Submit(ctx, SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, func(context.Context) (json.RawMessage, error) {
			called = true
			return nil, nil
		})
		if err == nil || called || !strings.Contains(err.Error(), "durable task store is unavailable") {
			t.Fatalf("%v called=%v", err, called)
		}
	})
	t.Run("an upstream error result is returned and the task failed", func(t *testing.T) {
		st := boltStore(t)
		s := newService(t, st, &remote{}, Config{})
		raw, err := s.Submit(ctx, SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, func(context.Context) (json.RawMessage, error) {
			return toolErr("quota exceeded"), nil
		})
		if err != nil || !strings.Contains(string(raw), "quota exceeded") {
			t.Fatalf("%s %v", raw, err)
		}
		ts, _ := st.List(ctx, Query{User: "u"})
		if len(ts) != 1 || ts[0].Status != StatusFailed {
			t.Fatalf("%+v", ts)
		}
	})
}

// statusScript answers status calls: errs isError results, then running
// twice, then completed.
func completeAfter(errs int) func(Call, int) (json.RawMessage, error) {
	return func(c Call, n int) (json.RawMessage, error) {
		var a struct {
			TaskID string `json:"task_id"`
		}
		_ = json.Unmarshal(c.Args, &a)
		switch {
		case c.Tool == "cancel":
			return sc(`{"task_id":"` + a.TaskID + `","status":"cancelled"}`), nil
		case n < errs:
			return toolErr("busy"), nil
		}
		return sc(`{"task_id":"` + a.TaskID + `","status":"completed","result":{"ok":true}}`), nil
	}
}

func TestPollerCompletesAfterErrorsWithGrowingBackoff(t *testing.T) {
	st := boltStore(t)
	r := &remote{answer: completeAfter(3)}
	s := newService(t, st, r, Config{PollInterval: 20 * time.Millisecond, MaxPollBackoff: time.Second, Lease: 5 * time.Second})
	var evMu sync.Mutex
	var evs []Event
	defer s.Subscribe(func(e Event) { evMu.Lock(); evs = append(evs, e); evMu.Unlock() })()
	s.Start()
	defer func() { _ = s.Stop(context.Background()) }()
	raw, err := s.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, submitOK("r-1"))
	if err != nil {
		t.Fatal(err)
	}
	id := submitted(t, raw)
	waitFor(t, func() bool { tk, _ := st.Get(context.Background(), id); return tk.Status == StatusCompleted })
	tk, _ := st.Get(context.Background(), id)
	if string(tk.Result) != `{"ok":true}` || tk.PollAttempts != 4 || tk.ConsecutiveErrors != 0 {
		t.Fatalf("%+v", tk)
	}
	r.mu.Lock()
	at := append([]time.Time(nil), r.at...)
	r.mu.Unlock()
	// After errors 1, 2, 3 the next poll waits at least 20, 40, 80 ms (a
	// loaded machine may poll later, never sooner).
	if len(at) != 4 {
		t.Fatalf("%d polls", len(at))
	}
	for i := 1; i < len(at); i++ {
		if g, min := at[i].Sub(at[i-1]), 20*time.Millisecond<<(i-1); g < min {
			t.Fatalf("poll %d came %v after the previous error, before its backoff of %v", i+1, g, min)
		}
	}
	terminal := func() (n int) {
		evMu.Lock()
		defer evMu.Unlock()
		for _, e := range evs {
			if e.Status.Terminal() {
				n++
			}
		}
		return n
	}
	waitFor(t, func() bool { return terminal() > 0 })
	if terminal() != 1 {
		t.Fatalf("terminal events %d: %+v", terminal(), evs)
	}
}

func TestPollerProtocolErrorFailsTask(t *testing.T) {
	st := boltStore(t)
	r := &remote{answer: func(Call, int) (json.RawMessage, error) { return sc(`{"task_id":"wrong","status":"running"}`), nil }}
	s := newService(t, st, r, Config{PollInterval: 10 * time.Millisecond})
	s.Start()
	defer func() { _ = s.Stop(context.Background()) }()
	raw, _ := s.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, submitOK("r-1"))
	id := submitted(t, raw)
	waitFor(t, func() bool { tk, _ := st.Get(context.Background(), id); return tk.Status == StatusFailed })
	tk, _ := st.Get(context.Background(), id)
	if !strings.Contains(tk.Error, "does not match the persisted remote task") || r.count("status") != 1 || tk.RemoteFailure {
		t.Fatalf("%+v, polls %d", tk, r.count("status"))
	}
}

// A failure the remote reports is marked as the remote's (a tool-level
// error for the tasks extension).
func TestPollerRemoteFailure(t *testing.T) {
	st := boltStore(t)
	r := &remote{answer: func(Call, int) (json.RawMessage, error) {
		return sc(`{"task_id":"r-1","status":"failed","error":"quota exceeded"}`), nil
	}}
	s := newService(t, st, r, Config{PollInterval: 10 * time.Millisecond})
	s.Start()
	defer func() { _ = s.Stop(context.Background()) }()
	raw, _ := s.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, submitOK("r-1"))
	id := submitted(t, raw)
	waitFor(t, func() bool { tk, _ := st.Get(context.Background(), id); return tk.Status == StatusFailed })
	tk, _ := st.Get(context.Background(), id)
	if tk.Error != "quota exceeded" || !tk.RemoteFailure {
		t.Fatalf("%+v", tk)
	}
}

func TestCancelRequestStopsPolling(t *testing.T) {
	st := boltStore(t)
	block := make(chan struct{})
	r := &remote{answer: func(c Call, n int) (json.RawMessage, error) {
		if c.Tool == "cancel" {
			if n == 0 {
				return nil, errors.New("remote down")
			}
			return sc(`{"task_id":"r-1","status":"cancelled"}`), nil
		}
		<-block
		return sc(`{"task_id":"r-1","status":"completed"}`), nil
	}}
	s := newService(t, st, r, Config{PollInterval: 10 * time.Millisecond})
	s.Start()
	defer func() { _ = s.Stop(context.Background()) }()
	ctx := context.Background()
	raw, _ := s.Submit(ctx, SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, submitOK("r-1"))
	id := submitted(t, raw)
	waitFor(t, func() bool { return r.count("status") == 1 })
	tk, err := s.RequestCancel(ctx, "u", id)
	if err != nil || !tk.CancelRequested() || tk.Status.Terminal() {
		t.Fatalf("cancel request: %+v %v", tk, err)
	}
	close(block) // the poll in flight answers "completed": it must be discarded
	waitFor(t, func() bool { tk, _ := st.Get(ctx, id); return tk.Status.Terminal() })
	tk, _ = st.Get(ctx, id)
	if tk.Status != StatusCancelled || tk.CancelAttempts != 2 {
		t.Fatalf("after cancel: %+v (cancel calls %d)", tk, r.count("cancel"))
	}
	if _, err := s.RequestCancel(ctx, "other", id); !errors.Is(err, ErrNotFound) {
		t.Fatal("another user cancelled")
	}
}

func TestStopReleasesLeases(t *testing.T) {
	st := boltStore(t)
	started := make(chan struct{}, 10)
	ctxCaller := callerFunc(func(ctx context.Context, c Call) (json.RawMessage, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	a := newService(t, st, ctxCaller, Config{PollInterval: 10 * time.Millisecond, Lease: time.Hour})
	a.Start()
	raw, _ := a.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, submitOK("r-1"))
	id := submitted(t, raw)
	<-started
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	// With an hour's lease, only the release lets another replica in now.
	r := &remote{answer: completeAfter(0)}
	b := newService(t, st, r, Config{PollInterval: 10 * time.Millisecond, Lease: time.Hour})
	b.Start()
	defer func() { _ = b.Stop(context.Background()) }()
	waitFor(t, func() bool { tk, _ := st.Get(context.Background(), id); return tk.Status == StatusCompleted })
	if tk, _ := st.Get(context.Background(), id); tk.PollAttempts != 1 {
		t.Fatalf("the cancelled poll counted: %+v", tk)
	}
}

type callerFunc func(ctx context.Context, c Call) (json.RawMessage, error)

func (f callerFunc) CallTool(ctx context.Context, c Call) (json.RawMessage, error) { return f(ctx, c) }

func TestInterruptedSubmitFails(t *testing.T) {
	st := boltStore(t)
	now := time.Now()
	tk := newTask("u", "th", now.Add(-time.Hour))
	tk.Status, tk.NextPollAt = StatusPending, now.Add(-time.Minute)
	_ = st.Create(context.Background(), tk)
	s := newService(t, st, &remote{}, Config{PollInterval: 10 * time.Millisecond})
	s.Start()
	defer func() { _ = s.Stop(context.Background()) }()
	waitFor(t, func() bool { x, _ := st.Get(context.Background(), tk.ID); return x.Status == StatusFailed })
	x, _ := st.Get(context.Background(), tk.ID)
	if !strings.Contains(x.Error, "submit did not complete") {
		t.Fatal(x.Error)
	}
}

func TestBuiltinTools(t *testing.T) {
	st := boltStore(t)
	s := newService(t, st, &remote{}, Config{})
	ctx := context.Background()
	var ids []string
	for i, name := range []string{"report", "Export", "report"} {
		ts := triple
		ts.Name = name
		raw, err := s.Submit(ctx, SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: ts}, submitOK(fmt.Sprint("r-", i)))
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			SC struct {
				TaskID string `json:"task_id"`
			} `json:"structuredContent"`
		}
		_ = json.Unmarshal(raw, &r)
		ids = append(ids, r.SC.TaskID)
	}
	call := func(name, args string) map[string]any {
		raw, ok := s.CallBuiltin(ctx, "u", "th", name, json.RawMessage(args))
		if !ok {
			t.Fatalf("%s not a builtin", name)
		}
		var r struct {
			SC map[string]any `json:"structuredContent"`
		}
		_ = json.Unmarshal(raw, &r)
		return r.SC
	}
	if l := call(ToolList, `{}`); l["count"] != 3.0 {
		t.Fatalf("list %v", l)
	}
	if c := call(ToolCancel, `{"task":"REPORT"}`); c["cancelled"] != false || !strings.HasPrefix(c["message"].(string), "More than one active background task matches; specify one task name: report, report") {
		t.Fatalf("ambiguous cancel %v", c)
	}
	c := call(ToolCancel, `{"task":"export"}`)
	if c["message"] != cancelMessage || c["task"].(map[string]any)["cancel_requested"] != true {
		t.Fatalf("cancel %v", c)
	}
	if c := call(ToolCancel, `{"task":"nope"}`); c["message"] != "No active background task matches this request" {
		t.Fatalf("no match %v", c)
	}
	g := call(ToolGet, `{"task_id":"`+ids[0]+`"}`)
	if g["task_id"] != ids[0] || g["status"] != "submitted" || g["result"] != nil {
		t.Fatalf("get %v", g)
	}
	for k := range g {
		if strings.Contains(k, "remote") || strings.Contains(k, "server") {
			t.Fatalf("detail exposes %s", k)
		}
	}
	if raw, _ := s.CallBuiltin(ctx, "other", "th", ToolGet, json.RawMessage(`{"task_id":"`+ids[0]+`"}`)); !strings.Contains(string(raw), `"isError":true`) {
		t.Fatalf("another user's get: %s", raw)
	}
	if _, ok := s.CallBuiltin(ctx, "u", "th", "echo", nil); ok {
		t.Fatal("echo is not a builtin")
	}
	if !strings.HasSuffix(SubmitDescription("Make a report.", "report"), "\n\nSubmitted as durable background task 'report'; returns a task ID immediately and status polling is handled automatically.") {
		t.Fatal("contract")
	}
}

// A submit that takes longer than two leases is still in flight, not
// interrupted: the poller must not fail its pending record, and its handle
// must be recorded (seen as "MCP task is already finished" under load).
func TestSlowSubmitIsNotFailed(t *testing.T) {
	st := boltStore(t)
	r := &remote{answer: completeAfter(0)}
	s := newService(t, st, r, Config{PollInterval: 5 * time.Millisecond, Lease: 40 * time.Millisecond})
	s.Start()
	defer func() { _ = s.Stop(context.Background()) }()
	slow := func(ctx context.Context) (json.RawMessage, error) {
		time.Sleep(300 * time.Millisecond) // 7 leases: the pending deadline passes several times
		return submitOK("r-slow")(ctx)
	}
	raw, err := s.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, slow)
	if err != nil {
		t.Fatal(err)
	}
	id := submitted(t, raw)
	waitFor(t, func() bool { tk, _ := st.Get(context.Background(), id); return tk.Status == StatusCompleted })
	if n := r.count("cancel"); n != 0 {
		t.Fatalf("the slow submit's remote task was cancelled %d times", n)
	}
}

// A submit whose call panics holds its record no longer: the renewals end
// with the call, and a poller fails the record after two leases, as for a
// replica that stopped mid-submit.
func TestPanickingSubmitReleasesItsRecord(t *testing.T) {
	st := boltStore(t)
	s := newService(t, st, &remote{answer: completeAfter(0)}, Config{PollInterval: 5 * time.Millisecond, Lease: 40 * time.Millisecond})
	s.Start()
	defer func() { _ = s.Stop(context.Background()) }()
	boom := func(context.Context) (json.RawMessage, error) {
		time.Sleep(60 * time.Millisecond) // renewed at least once
		panic("boom")
	}
	func() {
		defer func() { _ = recover() }()
		_, _ = s.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, boom)
	}()
	waitFor(t, func() bool {
		ts, _ := st.List(context.Background(), Query{User: "u"})
		return len(ts) == 1 && ts[0].Status == StatusFailed && strings.Contains(ts[0].Error, "submit did not complete")
	})
}

// TestSubmitKeepsTrace: a submit's trace context is stored with the task
// when it is short printable ASCII (dropped otherwise) and reaches the
// Caller with each poll, through the store.
func TestSubmitKeepsTrace(t *testing.T) {
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	for _, tc := range []struct{ name, trace, want string }{
		{"traceparent", tp, tp},
		{"control character", tp + "\n", ""},
		{"not ASCII", tp + "é", ""},
		{"too long", tp + strings.Repeat("x", MaxTraceLen), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := boltStore(t)
			r := &remote{answer: completeAfter(0)}
			s := newService(t, st, r, Config{PollInterval: 10 * time.Millisecond})
			s.Start()
			defer func() { _ = s.Stop(context.Background()) }()
			raw, err := s.Submit(context.Background(), SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple, Trace: tc.trace}, submitOK("r-1"))
			if err != nil {
				t.Fatal(err)
			}
			id := submitted(t, raw)
			waitFor(t, func() bool { tk, _ := st.Get(context.Background(), id); return tk.Status == StatusCompleted })
			if tk, _ := st.Get(context.Background(), id); tk.Trace != tc.want {
				t.Fatalf("stored trace %q, want %q", tk.Trace, tc.want)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if c := r.calls[0]; c.Task == nil || c.Task.ID != id || c.Task.Trace != tc.want {
				t.Fatalf("the poll's Call carries task %+v, want id %s and trace %q", c.Task, id, tc.want)
			}
		})
	}
}

// TestRequestPathBoundedOnHungRedis (issue 34): with Redis hung (SIGSTOP),
// a submit fails before the upstream sees it, and a read fails, each
// within RequestStoreTimeout (go-redis's retries of a timed-out read
// would otherwise take about 20 s).
func TestRequestPathBoundedOnHungRedis(t *testing.T) {
	r := mcptest.StartRedis(t, false)
	st := newRedisFor(t, r.URL(), "hung:")
	s := newService(t, st, &remote{}, Config{PollInterval: time.Second})
	ctx := context.Background()
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	r.Pause()
	defer r.Resume()
	start := time.Now()
	called := false
	_, err := s.Submit(ctx, SubmitRequest{User: "u", Thread: "th", Server: "jobs", Toolset: triple}, func(context.Context) (json.RawMessage, error) {
		called = true
		return nil, nil
	})
	if took := time.Since(start); err == nil || called || took > RequestStoreTimeout+2*time.Second {
		t.Fatalf("submit on a hung Redis: err %v, upstream called %v, took %s", err, called, took)
	}
	start = time.Now()
	if _, err := s.List(ctx, Query{User: "u"}); err == nil || time.Since(start) > RequestStoreTimeout+2*time.Second {
		t.Fatalf("list on a hung Redis: err %v after %s", err, time.Since(start))
	}
}
