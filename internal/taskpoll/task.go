// Package taskpoll turns submit/status/cancel tool triples into durable
// background tasks (DeerFlow's ordinary-tools driver): a Store that keeps task
// records, a due-time index and fenced per-task leases (Redis for any number
// of replicas, bbolt for one), a Poller that claims due tasks and calls the
// status and cancel tools, and a Service that submits, lists, reads and
// cancels tasks and fans task events out to every replica.
//
// taskpoll knows nothing of MCP sessions or HTTP: the caller supplies a
// Caller that runs a raw tool on a server with server-level credentials, and
// receives Events to deliver to its own sessions.
package taskpoll

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Status is a task's state. Pending, Submitted, Working and InputRequired
// are active; Completed, Failed and Cancelled are terminal and never change.
type Status string

// Task statuses. Pending is mcp-mux's own: the record written before the
// submit tool is called, so that a submit the mux did not see through is
// never silently lost.
const (
	StatusPending       Status = "pending"
	StatusSubmitted     Status = "submitted"
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Statuses lists every status, active ones first.
var Statuses = []Status{StatusPending, StatusSubmitted, StatusWorking, StatusInputRequired, StatusCompleted, StatusFailed, StatusCancelled}

// Terminal reports whether s is completed, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Attention reports whether a change to s is worth telling the owner about:
// input_required and the terminal statuses (DeerFlow's "attention" set).
func (s Status) Attention() bool { return s == StatusInputRequired || s.Terminal() }

// Storage limits (DeerFlow's constants).
const (
	MaxServerNameLen   = 128
	MaxRemoteIDLen     = 255
	MaxTaskNameLen     = 255
	MaxErrorChars      = 4000
	MaxPayloadBytes    = 65536 // input_required and result_artifact
	MaxPollAfter       = 24 * time.Hour
	maxToolErrorDetail = 500
	// MaxUserLen and MaxThreadLen bound the owner fields, as DeerFlow's
	// String(64) columns do (a thread id may be an MCP session id).
	MaxUserLen   = 128
	MaxThreadLen = 255
	MaxTraceLen  = 256 // Task.Trace
)

// Task is one durable task record. The remote id and server name are the
// mux's own: they are never shown to a client.
type Task struct {
	ID     string `json:"id"`
	User   string `json:"user"`
	Thread string `json:"thread"`
	// Server is the upstream server; Name the toolset (the model-visible
	// task name); SubmitTool, StatusTool and CancelTool its raw tool names.
	Server     string `json:"server"`
	Name       string `json:"name"`
	SubmitTool string `json:"submit_tool,omitempty"`
	StatusTool string `json:"status_tool"`
	CancelTool string `json:"cancel_tool"`
	RemoteID   string `json:"remote_id,omitempty"`
	Trace      string `json:"trace,omitempty"` // the submit's W3C traceparent: its polls' spans link to it

	Status        Status `json:"status"`
	StatusMessage string `json:"status_message,omitempty"`
	// Result is the status tool's result as raw JSON, or nil when it was
	// larger than max_result_bytes: then ResultPreview holds its first
	// characters and ResultTruncated is set.
	Result          json.RawMessage `json:"result,omitempty"`
	ResultPreview   string          `json:"result_preview,omitempty"`
	ResultTruncated bool            `json:"result_truncated,omitempty"`
	ResultArtifact  json.RawMessage `json:"result_artifact,omitempty"`
	Error           string          `json:"error,omitempty"`
	// RemoteFailure marks a failure the remote reported (its job failed: a
	// tool-level error), as opposed to one mcp-mux decided (a malformed
	// answer, a submit it did not see through).
	RemoteFailure bool            `json:"remote_failure,omitempty"`
	InputRequired json.RawMessage `json:"input_required,omitempty"`

	CreatedAt   time.Time `json:"created_at"`
	UpdatedAt   time.Time `json:"updated_at"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
	// TTL is how long the record is kept after it became terminal
	// (mcp_tasks.retention_seconds; 0: kept until deleted); PollInterval
	// the remote's poll_after_seconds hint.
	TTL          time.Duration `json:"ttl,omitempty"`
	PollInterval time.Duration `json:"poll_interval,omitempty"`

	// NextPollAt is when the poller next looks at the task (zero: never).
	NextPollAt        time.Time `json:"next_poll_at,omitzero"`
	LastPolledAt      time.Time `json:"last_polled_at,omitzero"`
	PollAttempts      int       `json:"poll_attempts,omitempty"`
	ConsecutiveErrors int       `json:"consecutive_errors,omitempty"`
	LastPollError     string    `json:"last_poll_error,omitempty"`
	// Degraded is set once ConsecutiveErrors reached the tracking_degraded
	// threshold, cleared by the next successful poll.
	Degraded bool `json:"degraded,omitempty"`

	CancelRequestedAt time.Time `json:"cancel_requested_at,omitzero"`
	CancelAttempts    int       `json:"cancel_attempts,omitempty"`
	LastCancelError   string    `json:"last_cancel_error,omitempty"`

	// Version counts events: it grows by one with every change an owner is
	// told about.
	Version int64 `json:"version"`
}

// CancelRequested reports whether a cancel was asked for.
func (t *Task) CancelRequested() bool { return !t.CancelRequestedAt.IsZero() }

// Clone returns a deep copy.
func (t *Task) Clone() *Task {
	c := *t
	c.Result = cloneRaw(t.Result)
	c.ResultArtifact = cloneRaw(t.ResultArtifact)
	c.InputRequired = cloneRaw(t.InputRequired)
	return &c
}

func cloneRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return append(json.RawMessage(nil), r...)
}

// NewID returns a fresh local task id: "mcp-task-" and 32 hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "mcp-task-" + hex.EncodeToString(b[:])
}

// ValidID reports whether id has NewID's form, so that no hostile id
// reaches a store key.
func ValidID(id string) bool {
	const p = "mcp-task-"
	if len(id) != len(p)+32 || id[:len(p)] != p {
		return false
	}
	for _, c := range id[len(p):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Event is a change to a task that its owner is told about: a status change
// (pending → submitted excluded), tracking becoming degraded or recovering.
// Every replica receives every event and delivers it to its own sessions of
// (User, Thread).
type Event struct {
	TaskID   string `json:"task_id"`
	User     string `json:"user"`
	Thread   string `json:"thread"`
	Name     string `json:"task_name"`
	Status   Status `json:"status"`
	Degraded bool   `json:"tracking_degraded,omitempty"`
	Version  int64  `json:"version"`
}

func eventOf(t *Task) Event {
	return Event{TaskID: t.ID, User: t.User, Thread: t.Thread, Name: t.Name, Status: t.Status, Degraded: t.Degraded, Version: t.Version}
}

// Store errors.
var (
	// ErrNotFound: no task has this id.
	ErrNotFound = errors.New("MCP task not found")
	// ErrExists: Create was given an id that exists.
	ErrExists = errors.New("MCP task id already exists")
	// ErrConflict: the task changed between the read and the write of an Update.
	ErrConflict = errors.New("MCP task was changed concurrently")
	// ErrTerminal: a terminal task cannot change.
	ErrTerminal = errors.New("MCP task is already finished")
)

// ActiveLimitError is returned when a user already has Limit active
// (not yet finished) tasks: nothing was recorded or submitted.
type ActiveLimitError struct{ Limit int }

func (e *ActiveLimitError) Error() string {
	return fmt.Sprintf("too many active background tasks: this caller already has %d, the limit (mcp_tasks.max_active_tasks_per_user); wait for one to finish or cancel one", e.Limit)
}

// DuplicateRemoteError is returned when a (user, server, remote id) is
// already tracked by another task.
type DuplicateRemoteError struct{ RemoteID, Server string }

func (e *DuplicateRemoteError) Error() string {
	return "Remote MCP task " + quote(e.RemoteID) + " is already tracked for server " + quote(e.Server) + " by this user"
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return "'" + string(b[1:len(b)-1]) + "'"
}
