package mcptest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TaskServer is a real MCP server with a DeerFlow ordinary-tools triple:
// submit_job(input) → {task_id, status: "running"}, job_status(task_id) and
// cancel_job(task_id). It records every status call (task id, time, HTTP
// headers) so tests can count polls.
type TaskServer struct {
	// PollsToComplete is how many status calls a job answers "running"
	// before "completed" (0: the first one completes).
	PollsToComplete int
	// ErrorsFirst makes the first n status calls of each job isError results.
	ErrorsFirst int
	// HangFirst makes the first status call of each job block until its
	// request is cancelled (the caller was killed or gave up).
	HangFirst bool
	// SameRemoteID, when set, is the task id every submit answers (a
	// server that hands out one id twice).
	SameRemoteID string
	// Held makes each job answer "running" until Release names the input
	// it was submitted with (a job the test finishes when it chooses).
	Held bool

	mu      sync.Mutex
	stop    chan struct{}
	stopped bool
	next    int
	polls   map[string][]time.Time
	hdrs    []http.Header
	cancel  map[string]int
	inputs  map[string]string // job id → submit input
	freed   map[string]bool   // inputs Release named
}

// StatusArgs are the status and cancel tools' arguments.
type StatusArgs struct {
	TaskID string `json:"task_id"`
}

// SubmitArgs are the submit tool's arguments.
type SubmitArgs struct {
	Input string `json:"input"`
}

// TaskState is a status tool's structured answer.
type TaskState struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
	Result any    `json:"result,omitempty"`
}

// MCP returns the server (one per call: serve it once).
func (ts *TaskServer) MCP() *mcp.Server {
	ts.mu.Lock()
	if ts.polls == nil {
		ts.polls, ts.cancel, ts.stop = map[string][]time.Time{}, map[string]int{}, make(chan struct{})
		ts.inputs = map[string]string{}
	}
	stop := ts.stop
	ts.mu.Unlock()
	s := mcp.NewServer(&mcp.Implementation{Name: "jobs", Version: "test"}, nil)
	submit := func(a SubmitArgs) TaskState {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.next++
		id := fmt.Sprintf("job-%d", ts.next)
		if ts.SameRemoteID != "" {
			id = ts.SameRemoteID
		}
		ts.inputs[id] = a.Input
		return TaskState{TaskID: id, Status: "running"}
	}
	// Typed: its outputSchema is the server's task state, which mcp-mux's
	// submit answer (the task handle) does not match; mcp-mux lists its own.
	mcp.AddTool(s, &mcp.Tool{Name: "submit_job", Description: "Start a job."}, func(_ context.Context, _ *mcp.CallToolRequest, a SubmitArgs) (*mcp.CallToolResult, TaskState, error) {
		return nil, submit(a), nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "job_status", Description: "A job's status."},
		func(ctx context.Context, req *mcp.CallToolRequest, a StatusArgs) (*mcp.CallToolResult, TaskState, error) {
			ts.mu.Lock()
			n := len(ts.polls[a.TaskID])
			ts.polls[a.TaskID] = append(ts.polls[a.TaskID], time.Now())
			if req.Extra != nil {
				ts.hdrs = append(ts.hdrs, req.Extra.Header.Clone())
			}
			held := ts.Held && !ts.freed[ts.inputs[a.TaskID]]
			ts.mu.Unlock()
			if ts.HangFirst && n == 0 {
				// A killed caller does not cancel the request: Unblock ends it.
				select {
				case <-ctx.Done():
				case <-stop:
				}
				return nil, TaskState{}, errors.New("abandoned")
			}
			if n < ts.ErrorsFirst {
				return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "backend busy"}}}, TaskState{}, nil
			}
			if held || n < ts.ErrorsFirst+ts.PollsToComplete {
				return nil, TaskState{TaskID: a.TaskID, Status: "running"}, nil
			}
			return nil, TaskState{TaskID: a.TaskID, Status: "completed", Result: map[string]any{"ok": true, "polls": n + 1}}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_job", Description: "Cancel a job."},
		func(_ context.Context, _ *mcp.CallToolRequest, a StatusArgs) (*mcp.CallToolResult, TaskState, error) {
			ts.mu.Lock()
			ts.cancel[a.TaskID]++
			ts.mu.Unlock()
			return nil, TaskState{TaskID: a.TaskID, Status: "cancelled"}, nil
		})
	return s
}

// Unblock ends the status calls HangFirst holds (call it before the
// server's sessions are closed).
func (ts *TaskServer) Unblock() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.stop != nil && !ts.stopped {
		ts.stopped = true
		close(ts.stop)
	}
}

// Release lets the held jobs submitted with input complete at their next
// status call.
func (ts *TaskServer) Release(input string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.freed == nil {
		ts.freed = map[string]bool{}
	}
	ts.freed[input] = true
}

// Polls returns the times of each job's status calls.
func (ts *TaskServer) Polls() map[string][]time.Time {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make(map[string][]time.Time, len(ts.polls))
	for k, v := range ts.polls {
		out[k] = append([]time.Time(nil), v...)
	}
	return out
}

// StatusHeaders returns the HTTP headers of every status call.
func (ts *TaskServer) StatusHeaders() []http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return append([]http.Header(nil), ts.hdrs...)
}

// Cancels returns how often each job was cancelled.
func (ts *TaskServer) Cancels() map[string]int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := make(map[string]int, len(ts.cancel))
	for k, v := range ts.cancel {
		out[k] = v
	}
	return out
}

// TaskServerJSON is the config entry of a TaskServer at url (extra: more
// keys, with a leading comma).
func TaskServerJSON(url, extra string) string {
	return `{"type": "http", "url": "` + url + `", "task_toolsets": [{"name": "job", "submit_tool": "submit_job", "status_tool": "job_status", "cancel_tool": "cancel_job"}]` + extra + `}`
}

// Submits returns how many jobs the submit tool started.
func (ts *TaskServer) Submits() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.next
}
