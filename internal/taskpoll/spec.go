package taskpoll

import (
	"bytes"
	"encoding/json"
	"time"
)

// The 2026-07-28 tasks extension's view of a task (io.modelcontextprotocol/
// tasks, SEP-2663): a DetailedTask, as tasks/get answers it and
// notifications/tasks carries it. Like the other public views it names the
// local task id only, never the remote id or server name.
//
// DeerFlow's statuses map onto the extension's: pending and submitted are
// working; input_required stays input_required, but a DeerFlow toolset has
// no way to take an answer (its input_required is a remote status carrying
// a message), so inputRequests is always empty, statusMessage carries the
// remote's message and _meta the payload as the remote sent it; completed
// inlines the status tool's result as a CallToolResult (the raw JSON as
// structuredContent and as text, a result_artifact as a resource link); a
// failure the remote reported is a tool error (completed, isError: the
// extension keeps failed for protocol errors), one mcp-mux decided (a
// malformed answer, a submit it did not see through) is failed with the
// task's error as a JSON-RPC internal error.

// ExtensionMetaInputRequired is the _meta key of an input_required task's
// remote payload.
const ExtensionMetaInputRequired = "io.github.mcp-mux/input_required"

// ExtensionTask is the extension's shape of one task.
type ExtensionTask struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is how long the record is kept once the task finished
	// (mcp_tasks.retention_seconds); an active task is never removed.
	TTLMs          *int64          `json:"ttlMs"`
	PollIntervalMs int64           `json:"pollIntervalMs,omitempty"`
	InputRequests  json.RawMessage `json:"inputRequests,omitempty"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          *ExtensionError `json:"error,omitempty"`
	Meta           map[string]any  `json:"_meta,omitempty"`
}

// ExtensionError is a failed task's JSON-RPC error.
type ExtensionError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// codeInternalError is JSON-RPC's internal error.
const codeInternalError = -32603

// ExtensionView is t in the extension's shape.
func (s *Service) ExtensionView(t *Task) ExtensionTask {
	ttlMs := s.cfg.ttl(t).Milliseconds()
	v := ExtensionTask{
		TaskID: t.ID, CreatedAt: extTime(t.CreatedAt), LastUpdatedAt: extTime(t.UpdatedAt),
		TTLMs: &ttlMs, PollIntervalMs: max(s.cfg.pollInterval(t).Milliseconds(), 1),
	}
	switch t.Status {
	case StatusPending, StatusSubmitted, StatusWorking:
		v.Status, v.StatusMessage = "working", SubmitMessage
		if t.Degraded {
			v.StatusMessage = "Status polling of the remote task keeps failing; mcp-mux keeps retrying."
		}
	case StatusInputRequired:
		v.Status, v.InputRequests = "input_required", json.RawMessage(`{}`)
		v.StatusMessage = inputMessage(t.InputRequired)
		if t.InputRequired != nil {
			v.Meta = map[string]any{ExtensionMetaInputRequired: t.InputRequired}
		}
	case StatusCompleted:
		v.Status, v.Result = "completed", toolResultOf(t)
	case StatusFailed:
		failedView(t, &v)
	case StatusCancelled:
		v.Status = "cancelled"
	}
	return v
}

// pollInterval is the interval a client should poll t at: the task's own
// (else the configured one), at least the input-required interval while
// the task waits for input.
func (c *Config) pollInterval(t *Task) time.Duration {
	poll := c.PollInterval
	if t.PollInterval > 0 {
		poll = t.PollInterval
	}
	if t.Status == StatusInputRequired {
		poll = max(poll, c.InputRequiredPollInterval)
	}
	return poll
}

// ttl is how long t's record is kept: its own TTL, else the retention.
func (c *Config) ttl(t *Task) time.Duration {
	if t.TTL > 0 {
		return t.TTL
	}
	return c.Retention
}

// failedView fills v for a failed task: a remote job's failure is a tool
// error, which the extension reports as completed with isError (failed is
// for protocol errors).
func failedView(t *Task, v *ExtensionTask) {
	msg := truncateRunes(t.Error, maxPublicErrorChars)
	if msg == "" {
		msg = "The task failed."
	}
	if t.RemoteFailure {
		v.Status, v.StatusMessage, v.Result = "completed", msg, toolErrorOf(msg)
		return
	}
	v.Status, v.StatusMessage, v.Error = "failed", msg, &ExtensionError{Code: codeInternalError, Message: msg}
}

func extTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// inputMessage is the statusMessage of an input_required task: the
// payload's own message, or the payload as JSON text.
func inputMessage(payload json.RawMessage) string {
	var p struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(payload, &p) == nil && p.Message != "" {
		return truncateRunes(p.Message, maxPublicErrorChars)
	}
	if len(payload) == 0 {
		return "The remote task needs input."
	}
	return "The remote task needs input: " + truncateRunes(string(payload), maxPublicErrorChars)
}

// toolErrorOf is a remote failure as a CallToolResult with isError.
func toolErrorOf(msg string) json.RawMessage {
	text, _ := json.Marshal(msg)
	return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}],"isError":true}`)
}

// toolResultOf is a completed task's result as a CallToolResult.
func toolResultOf(t *Task) json.RawMessage {
	type content struct {
		Type     string `json:"type"`
		Text     string `json:"text,omitempty"`
		URI      string `json:"uri,omitempty"`
		Name     string `json:"name,omitempty"`
		MimeType string `json:"mimeType,omitempty"`
	}
	var r struct {
		Content           []content       `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
		Meta              map[string]any  `json:"_meta,omitempty"`
	}
	switch {
	case t.Result != nil:
		r.Content = append(r.Content, content{Type: "text", Text: string(t.Result)})
		if b := bytes.TrimSpace(t.Result); len(b) > 0 && b[0] == '{' {
			r.StructuredContent = t.Result
		}
	case t.ResultTruncated:
		r.Content = append(r.Content, content{Type: "text", Text: t.ResultPreview})
		r.Meta = map[string]any{"io.github.mcp-mux/result_truncated": true}
	default:
		r.Content = append(r.Content, content{Type: "text", Text: "The task completed."})
	}
	if t.ResultArtifact != nil {
		var a struct {
			URI      string `json:"uri"`
			MimeType string `json:"mime_type"`
		}
		if json.Unmarshal(t.ResultArtifact, &a) == nil && a.URI != "" {
			r.Content = append(r.Content, content{Type: "resource_link", URI: a.URI, Name: "result_artifact", MimeType: a.MimeType})
		}
	}
	b, _ := json.Marshal(r)
	return b
}
