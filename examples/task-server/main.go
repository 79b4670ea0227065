// Command task-server is a minimal durable-task upstream for mcp-mux: a
// Streamable-HTTP MCP server with one submit/status/cancel triple that
// speaks the ordinary-tools protocol mcp-mux polls (docs/tasks.md:
// "How it works", "What a task server must answer").
//
//	go run ./examples/task-server [--listen 127.0.0.1:8933] [--work 5s]
//
// Its tools, configured in mcp-mux as
//
//	"reports": {"type": "http", "url": "http://127.0.0.1:8933/mcp",
//	  "task_toolsets": [{"name": "report", "submit_tool": "start_report",
//	    "status_tool": "report_status", "cancel_tool": "cancel_report"}]}
//
// are:
//
//	start_report({"topic"})     → {"task_id": "report-1", "status": "running"}
//	report_status({"task_id"})  → {"task_id", "status": "running", "poll_after_seconds"}
//	                              then {"task_id", "status": "completed", "result": {…}}
//	cancel_report({"task_id"})  → {"task_id", "status": "cancelled"} (or the finished status)
//
// Every answer is structuredContent: mcp-mux never parses the text. A
// report takes --work to finish. Tasks live in memory, so they end with
// the process; a real task server keeps them (mcp-mux polls a task until
// the server says it finished, across restarts of either side). Once
// listening it prints "task-server: serving http://ADDR/mcp" on stdout;
// SIGINT or SIGTERM stops it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// main serves until SIGINT or SIGTERM.
func main() {
	listen := flag.String("listen", "127.0.0.1:8933", "listen address")
	work := flag.Duration("work", 5*time.Second, "how long a report takes")
	flag.Parse()
	if err := serve(*listen, &reports{work: *work, tasks: map[string]*report{}}); err != nil {
		fmt.Fprintln(os.Stderr, "task-server:", err)
		os.Exit(1)
	}
}

// report is one task.
type report struct {
	topic     string
	done      time.Time // when it completes
	cancelled bool
}

// reports holds the server's tasks.
type reports struct {
	work  time.Duration
	mu    sync.Mutex
	next  int
	tasks map[string]*report
}

// SubmitArgs are start_report's arguments (the schema a client sees).
type SubmitArgs struct {
	Topic string `json:"topic" jsonschema:"what the report is about"`
}

// TaskArgs are the status and cancel tools' arguments: mcp-mux calls them
// with {"task_id": <the id the submit answered>} and nothing else.
type TaskArgs struct {
	TaskID string `json:"task_id"`
}

// Submitted is the submit tool's answer: status must be "running".
type Submitted struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
}

// State is the status and cancel tools' answer. Status is running,
// input_required, completed, failed or cancelled; result is any JSON, read
// once completed; poll_after_seconds (optional, > 0) asks for the next poll
// then; error_code "task_not_found" fails the task.
type State struct {
	TaskID           string   `json:"task_id"`
	Status           string   `json:"status"`
	Result           any      `json:"result,omitempty"`
	Error            string   `json:"error,omitempty"`
	ErrorCode        string   `json:"error_code,omitempty"`
	PollAfterSeconds *float64 `json:"poll_after_seconds,omitempty"`
}

// server returns the MCP server with the three tools.
func (rs *reports) server() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "task-server", Version: "example"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "start_report", Description: "Write a report on a topic."}, rs.start)
	mcp.AddTool(s, &mcp.Tool{Name: "report_status", Description: "A report's status (polled by mcp-mux)."}, rs.status)
	mcp.AddTool(s, &mcp.Tool{Name: "cancel_report", Description: "Cancel a report (called by mcp-mux)."}, rs.cancel)
	return s
}

// start records a report and answers its id at once.
func (rs *reports) start(_ context.Context, _ *mcp.CallToolRequest, a SubmitArgs) (*mcp.CallToolResult, Submitted, error) {
	if a.Topic == "" {
		// An isError result reaches the caller as the submit's result.
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "topic is required"}}}, Submitted{}, nil
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.next++
	id := fmt.Sprintf("report-%d", rs.next)
	rs.tasks[id] = &report{topic: a.Topic, done: time.Now().Add(rs.work)}
	return nil, Submitted{TaskID: id, Status: "running"}, nil
}

// status answers a report's state; a report still running asks to be
// polled again when it should be done.
func (rs *reports) status(_ context.Context, _ *mcp.CallToolRequest, a TaskArgs) (*mcp.CallToolResult, State, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return nil, rs.state(a.TaskID), nil
}

// cancel cancels a running report; a finished one keeps its status.
func (rs *reports) cancel(_ context.Context, _ *mcp.CallToolRequest, a TaskArgs) (*mcp.CallToolResult, State, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if r, ok := rs.tasks[a.TaskID]; ok && time.Now().Before(r.done) {
		r.cancelled = true
	}
	return nil, rs.state(a.TaskID), nil
}

// state is id's State (rs.mu held).
func (rs *reports) state(id string) State {
	r, ok := rs.tasks[id]
	switch {
	case !ok:
		return State{TaskID: id, Status: "failed", ErrorCode: "task_not_found", Error: "no report " + id}
	case r.cancelled:
		return State{TaskID: id, Status: "cancelled"}
	case time.Now().Before(r.done):
		after := max(time.Until(r.done).Seconds(), 0.05)
		return State{TaskID: id, Status: "running", PollAfterSeconds: &after}
	default:
		return State{TaskID: id, Status: "completed", Result: map[string]string{"topic": r.topic, "report": "All about " + r.topic + "."}}
	}
}

// serve serves rs at addr until a signal stops it.
func serve(addr string, rs *reports) error {
	srv := rs.server()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	fmt.Printf("task-server: serving http://%s/mcp\n", ln.Addr())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
