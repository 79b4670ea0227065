package taskpoll

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Model-visible surface: the submit wrapper's contract and result, the
// built-in tools, the task resource, and the public views of a task (the
// REST API's shapes). None of them carries the remote id or server name.

// Built-in tool names.
const (
	ToolList   = "list_background_tasks"
	ToolCancel = "cancel_background_task"
	ToolGet    = "get_background_task"
)

// ResourcePrefix starts every task resource URI: mux://tasks/{task_id}.
const ResourcePrefix = "mux://tasks/"

// listToolLimit is how many tasks list_background_tasks shows (DeerFlow: 20).
const listToolLimit = 20

// SubmitDescription is a submit tool's description with the durable-task
// contract appended (DeerFlow's text, without naming DeerFlow).
func SubmitDescription(desc, toolset string) string {
	return desc + "\n\n" + fmt.Sprintf("Submitted as durable background task '%s'; returns a task ID immediately and status polling is handled automatically.", toolset)
}

// BuiltinTools returns the tool objects of the built-in task tools.
func BuiltinTools() []json.RawMessage {
	return []json.RawMessage{
		json.RawMessage(`{"name":"` + ToolList + `","description":"List this conversation's durable background tasks (newest first, at most 20) with their status.","inputSchema":{"type":"object","properties":{"active_only":{"type":"boolean","description":"Only tasks that are still running.","default":false}}}}`),
		json.RawMessage(`{"name":"` + ToolCancel + `","description":"Request cancellation of a durable background task, by its exact task name or task id; the task may be omitted when exactly one task is active.","inputSchema":{"type":"object","properties":{"task":{"type":"string","description":"Task name (case-insensitive) or task id."}}}}`),
		json.RawMessage(`{"name":"` + ToolGet + `","description":"Get a durable background task's status and, once it finished, its result (or a preview of a large one), artifact and error.","inputSchema":{"type":"object","properties":{"task_id":{"type":"string","description":"The task id a submit returned."}},"required":["task_id"]}}`),
	}
}

// IsBuiltin reports whether name is a built-in task tool.
func IsBuiltin(name string) bool { return name == ToolList || name == ToolCancel || name == ToolGet }

// SubmitOutputSchema is a submit tool's outputSchema as mcp-mux lists
// it: the tool answers with the task's handle (SubmitResult), whatever the
// server's own submit returns, so the server's schema would not match it.
var SubmitOutputSchema = json.RawMessage(`{"type":"object","properties":{"task_id":{"type":"string"},"task_name":{"type":"string"},"status":{"type":"string"},"message":{"type":"string"}},"required":["task_id","task_name","status","message"]}`)

// SubmitResult is the submit wrapper's tool result for a submitted task.
func SubmitResult(t *Task) json.RawMessage {
	return structuredResult(map[string]string{"task_id": t.ID, "task_name": t.Name, "status": string(StatusSubmitted), "message": SubmitMessage}, false)
}

// structuredResult is a CallToolResult with v as structuredContent and as
// JSON text.
func structuredResult(v any, isError bool) json.RawMessage {
	sc, _ := json.Marshal(v)
	text, _ := json.Marshal(string(sc))
	out := `{"content":[{"type":"text","text":` + string(text) + `}],"structuredContent":` + string(sc)
	if isError {
		out += `,"isError":true`
	}
	return json.RawMessage(out + "}")
}

// ErrorResult is a CallToolResult with isError and msg as text.
func ErrorResult(msg string) json.RawMessage {
	text, _ := json.Marshal(msg)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}],"isError":true}`)
}

// Summary is a task as lists show it (DeerFlow's list item).
type Summary struct {
	TaskID           string  `json:"task_id"`
	TaskName         string  `json:"task_name"`
	Status           Status  `json:"status"`
	CreatedAt        string  `json:"created_at"`
	UpdatedAt        string  `json:"updated_at"`
	Error            *string `json:"error"`
	TrackingDegraded bool    `json:"tracking_degraded"`
	CancelRequested  bool    `json:"cancel_requested"`
}

// Detail is one task in full (DeerFlow's detail shape). mcp-mux tells the
// owner about changes with MCP notifications, not agent runs, so the
// notification fields report "none".
type Detail struct {
	Summary
	LastPolledAt             *string         `json:"last_polled_at"`
	LastPollError            *string         `json:"last_poll_error"`
	LastCancelError          *string         `json:"last_cancel_error"`
	CancelAttemptCount       int             `json:"cancel_attempt_count"`
	NotificationStatus       string          `json:"notification_status"`
	NotificationError        *string         `json:"notification_error"`
	NotificationAttemptCount int             `json:"notification_attempt_count"`
	Result                   json.RawMessage `json:"result"`
	ResultPreview            *string         `json:"result_preview"`
	ResultTruncated          bool            `json:"result_truncated"`
	ResultArtifact           json.RawMessage `json:"result_artifact"`
	InputRequired            json.RawMessage `json:"input_required"`
}

// maxPublicErrorChars bounds errors in the public views (DeerFlow: 500).
const maxPublicErrorChars = 500

func isoTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func optTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := isoTime(t)
	return &s
}

func optText(s string, n int) *string {
	if s == "" {
		return nil
	}
	s = truncateRunes(s, n)
	return &s
}

// SummaryOf is t's list view.
func SummaryOf(t *Task) Summary {
	return Summary{
		TaskID: t.ID, TaskName: t.Name, Status: t.Status,
		CreatedAt: isoTime(t.CreatedAt), UpdatedAt: isoTime(t.UpdatedAt),
		Error: optText(t.Error, maxPublicErrorChars), TrackingDegraded: t.Degraded, CancelRequested: t.CancelRequested(),
	}
}

// DetailOf is t's full view.
func DetailOf(t *Task) Detail {
	d := Detail{
		Summary:      SummaryOf(t),
		LastPolledAt: optTime(t.LastPolledAt), LastPollError: optText(t.LastPollError, maxPublicErrorChars),
		LastCancelError: optText(t.LastCancelError, maxPublicErrorChars), CancelAttemptCount: t.CancelAttempts,
		NotificationStatus: "none",
		Result:             t.Result, ResultTruncated: t.ResultTruncated, ResultArtifact: t.ResultArtifact, InputRequired: t.InputRequired,
	}
	if t.ResultTruncated {
		d.ResultPreview = &t.ResultPreview
	}
	return d
}

// CallBuiltin runs a built-in task tool for (user, thread) and returns its
// tool result; ok is false when name is not one.
func (s *Service) CallBuiltin(ctx context.Context, user, thread, name string, args json.RawMessage) (res json.RawMessage, ok bool) {
	if !IsBuiltin(name) {
		return nil, false
	}
	var a struct {
		ActiveOnly bool    `json:"active_only"`
		Task       *string `json:"task"`
		TaskID     string  `json:"task_id"`
	}
	if len(args) > 0 && string(args) != "null" {
		if err := json.Unmarshal(args, &a); err != nil {
			return ErrorResult(fmt.Sprintf("Invalid arguments for %s: %v", name, err)), true
		}
	}
	var out any
	var err error
	switch name {
	case ToolList:
		out, err = s.listTool(ctx, user, thread, a.ActiveOnly)
	case ToolCancel:
		out, err = s.cancelTool(ctx, user, thread, a.Task)
	case ToolGet:
		var t *Task
		if t, err = s.Get(ctx, user, a.TaskID); err == nil {
			out = DetailOf(t)
		}
	}
	if errors.Is(err, ErrNotFound) {
		return ErrorResult("MCP task not found"), true
	}
	if err != nil {
		return ErrorResult("The durable task store is unavailable: " + err.Error()), true
	}
	return structuredResult(out, false), true
}

type listItem struct {
	TaskID          string  `json:"task_id"`
	TaskName        string  `json:"task_name"`
	Status          Status  `json:"status"`
	CreatedAt       string  `json:"created_at"`
	UpdatedAt       string  `json:"updated_at"`
	Error           *string `json:"error"`
	CancelRequested bool    `json:"cancel_requested"`
}

func itemOf(t *Task) listItem {
	return listItem{TaskID: t.ID, TaskName: t.Name, Status: t.Status, CreatedAt: isoTime(t.CreatedAt), UpdatedAt: isoTime(t.UpdatedAt),
		Error: optText(t.Error, maxPublicErrorChars), CancelRequested: t.CancelRequested()}
}

func (s *Service) listTool(ctx context.Context, user, thread string, activeOnly bool) (any, error) {
	ts, err := s.List(ctx, Query{User: user, Thread: thread, ActiveOnly: activeOnly, Limit: listToolLimit})
	if err != nil {
		return nil, err
	}
	items := make([]listItem, 0, len(ts))
	for _, t := range ts {
		items = append(items, itemOf(t))
	}
	return map[string]any{"tasks": items, "count": len(items)}, nil
}

const cancelMessage = "Cancellation requested. mcp-mux will keep retrying safely if the remote server is temporarily unavailable."

// cancelTool cancels the one active task of (user, thread) that sel names
// (by id or name, any task when nil), or says why it cannot.
func (s *Service) cancelTool(ctx context.Context, user, thread string, sel *string) (any, error) {
	active, err := s.List(ctx, Query{User: user, Thread: thread, ActiveOnly: true, Limit: MaxListLimit})
	if err != nil {
		return nil, err
	}
	match := cancellable(active, sel)
	switch {
	case len(match) == 0:
		return map[string]any{"cancelled": false, "message": "No active background task matches this request"}, nil
	case len(match) > 1:
		return map[string]any{"cancelled": false, "message": "More than one active background task matches; specify one task name: " + strings.Join(taskNames(match), ", ")}, nil
	}
	t, err := s.RequestCancel(ctx, user, match[0].ID)
	if errors.Is(err, ErrNotFound) {
		return map[string]any{"cancelled": false, "message": "The selected background task no longer exists"}, nil
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"cancelled": t.Status == StatusCancelled, "task": itemOf(t), "message": cancelMessage}, nil
}

// cancellable returns the tasks sel selects (by id, or by name in any
// case; every task when nil) whose cancellation was not requested yet.
func cancellable(active []*Task, sel *string) []*Task {
	var match []*Task
	for _, t := range active {
		if t.CancelRequested() {
			continue
		}
		if sel == nil || t.ID == *sel || strings.EqualFold(t.Name, *sel) {
			match = append(match, t)
		}
	}
	return match
}

// taskNames returns the tasks' names, in order.
func taskNames(ts []*Task) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return names
}

// ReadResource answers resources/read of a task resource of user: the
// task's detail view as JSON text.
func (s *Service) ReadResource(ctx context.Context, user, uri string) (json.RawMessage, error) {
	t, err := s.Get(ctx, user, strings.TrimPrefix(uri, ResourcePrefix))
	if err != nil {
		return nil, err
	}
	body, _ := json.Marshal(DetailOf(t))
	out, _ := json.Marshal(map[string]any{"contents": []map[string]string{{"uri": uri, "mimeType": "application/json", "text": string(body)}}})
	return out, nil
}
