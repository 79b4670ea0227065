package taskpoll

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// The ordinary-tools driver (DeerFlow's ordinary.py): only a tool result's
// structuredContent is parsed, never its text.
//
//	submit(args)              → {"task_id": "<remote>", "status": "running"}
//	status({"task_id": rid})  → {task_id, status, result?, result_artifact?, error?,
//	                             error_code?, input_required?, poll_after_seconds?}
//	cancel({"task_id": rid})  → {task_id, status ∈ cancelled|completed|failed, …}
//
// isError on any of them is a transient error (retried with backoff) carrying
// the first text block; anything malformed is a ProtocolError (permanent).

// ProtocolError is a task tool answer that breaks the protocol: the task
// fails permanently.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return e.Msg }

// ToolError is an isError result of a task tool: transient.
type ToolError struct{ Msg string }

func (e *ToolError) Error() string { return e.Msg }

// snapshot is one status (or cancel) answer, mapped to local terms.
type snapshot struct {
	Status        Status
	Result        json.RawMessage
	Artifact      json.RawMessage
	Error         string
	InputRequired json.RawMessage
	PollAfter     time.Duration
}

type toolResult struct {
	Content           []json.RawMessage `json:"content"`
	StructuredContent json.RawMessage   `json:"structuredContent"`
	IsError           bool              `json:"isError"`
}

// structured returns a tool result's structuredContent object, or the
// ToolError / ProtocolError the result amounts to.
func structured(tool string, raw json.RawMessage) (json.RawMessage, error) {
	var r toolResult
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, &ProtocolError{Msg: fmt.Sprintf("MCP task tool %s returned a malformed result: %v", quote(tool), err)}
	}
	if r.IsError {
		msg := "MCP task tool " + quote(tool) + " returned an error"
		if d := firstText(r.Content); d != "" {
			msg += ": " + d
		}
		return nil, &ToolError{Msg: msg}
	}
	sc := bytes.TrimSpace(r.StructuredContent)
	if len(sc) == 0 || string(sc) == "null" {
		return nil, &ProtocolError{Msg: fmt.Sprintf("MCP task tool %s must return structuredContent; text content is not parsed", quote(tool))}
	}
	if sc[0] != '{' {
		return nil, invalid(tool, "structuredContent must be an object")
	}
	return sc, nil
}

// firstText is the first text block, stripped and bounded.
func firstText(content []json.RawMessage) string {
	for _, c := range content {
		var b struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(c, &b) == nil && b.Type == "text" {
			return truncateRunes(strings.TrimSpace(b.Text), maxToolErrorDetail)
		}
	}
	return ""
}

func invalid(tool, detail string) error {
	return &ProtocolError{Msg: fmt.Sprintf("Invalid structuredContent from MCP task tool %s: %s", quote(tool), detail)}
}

// parseSubmit returns the remote task id a submit tool answered.
func parseSubmit(tool string, raw json.RawMessage) (string, error) {
	sc, err := structured(tool, raw)
	if err != nil {
		return "", err
	}
	var p struct {
		TaskID *string `json:"task_id"`
		Status *string `json:"status"`
	}
	if err := json.Unmarshal(sc, &p); err != nil {
		return "", invalid(tool, err.Error())
	}
	switch {
	case p.TaskID == nil || *p.TaskID == "":
		return "", invalid(tool, "task_id must be a non-empty string")
	case p.Status == nil || *p.Status != "running":
		return "", invalid(tool, `status must be "running"`)
	}
	return *p.TaskID, nil
}

// statusAnswer is the structuredContent of a status or cancel answer, as
// sent: absent fields are nil.
type statusAnswer struct {
	TaskID        *string         `json:"task_id"`
	Status        *string         `json:"status"`
	Result        json.RawMessage `json:"result"`
	Artifact      json.RawMessage `json:"result_artifact"`
	Error         *string         `json:"error"`
	ErrorCode     *string         `json:"error_code"`
	InputRequired json.RawMessage `json:"input_required"`
	PollAfter     json.RawMessage `json:"poll_after_seconds"`
}

// remoteStatus maps the driver's status words to local statuses.
var remoteStatus = map[string]Status{
	"running":        StatusWorking,
	"input_required": StatusInputRequired,
	"completed":      StatusCompleted,
	"failed":         StatusFailed,
	"cancelled":      StatusCancelled,
}

// parseStatus reads a status answer (cancel: a cancel answer) for remote.
// Each step checks one part of the answer, in the order the protocol
// errors are reported.
func parseStatus(tool, remote string, raw json.RawMessage, cancel bool) (*snapshot, error) {
	p, err := decodeStatusAnswer(tool, remote, raw)
	if err != nil {
		return nil, err
	}
	s := &snapshot{}
	if s.Status, err = p.status(tool, cancel); err != nil {
		return nil, err
	}
	if s.Artifact, err = p.artifact(tool); err != nil {
		return nil, err
	}
	if p.Error != nil {
		s.Error = *p.Error
	}
	if s.InputRequired, err = p.inputRequired(tool, s.Status); err != nil {
		return nil, err
	}
	if s.PollAfter, err = p.pollAfter(tool); err != nil {
		return nil, err
	}
	if !isNull(p.Result) {
		s.Result = p.Result
	}
	p.applyNotFound(s)
	return s, nil
}

// decodeStatusAnswer decodes the answer's structuredContent and checks
// that it is about remote.
func decodeStatusAnswer(tool, remote string, raw json.RawMessage) (*statusAnswer, error) {
	sc, err := structured(tool, raw)
	if err != nil {
		return nil, err
	}
	var p statusAnswer
	if err := json.Unmarshal(sc, &p); err != nil {
		return nil, invalid(tool, err.Error())
	}
	if p.TaskID == nil || *p.TaskID == "" || len(*p.TaskID) > MaxRemoteIDLen {
		return nil, invalid(tool, fmt.Sprintf("task_id must be a string of 1 to %d characters", MaxRemoteIDLen))
	}
	if *p.TaskID != remote {
		return nil, &ProtocolError{Msg: fmt.Sprintf("MCP task response task_id does not match the persisted remote task: expected %s, got %s", quote(remote), quote(*p.TaskID))}
	}
	return &p, nil
}

// status maps the answer's status to a local one; a cancel answer must
// report a terminal status.
func (p *statusAnswer) status(tool string, cancel bool) (Status, error) {
	if p.Status == nil {
		return "", invalid(tool, "status is required")
	}
	st, ok := remoteStatus[*p.Status]
	if !ok {
		return "", invalid(tool, fmt.Sprintf("unknown status %s", quote(truncateRunes(*p.Status, 64))))
	}
	if cancel && !st.Terminal() {
		return "", invalid(tool, "a cancel answer's status must be cancelled, completed or failed")
	}
	return st, nil
}

// artifact returns result_artifact, which must be an object with a uri
// when present.
func (p *statusAnswer) artifact(tool string) (json.RawMessage, error) {
	if isNull(p.Artifact) {
		return nil, nil
	}
	var a struct {
		URI      *string `json:"uri"`
		MimeType *string `json:"mime_type"`
	}
	if json.Unmarshal(p.Artifact, &a) != nil || a.URI == nil {
		return nil, invalid(tool, "result_artifact must be an object with uri and mime_type")
	}
	return p.Artifact, nil
}

// inputRequired returns the input_required object, which status
// input_required must carry.
func (p *statusAnswer) inputRequired(tool string, st Status) (json.RawMessage, error) {
	var in json.RawMessage
	if !isNull(p.InputRequired) {
		if bytes.TrimSpace(p.InputRequired)[0] != '{' {
			return nil, invalid(tool, "input_required must be an object")
		}
		in = p.InputRequired
	}
	if st == StatusInputRequired && in == nil {
		return nil, invalid(tool, "status input_required needs an input_required payload")
	}
	return in, nil
}

// pollAfter returns poll_after_seconds as a duration capped at
// MaxPollAfter, or 0 when absent.
func (p *statusAnswer) pollAfter(tool string) (time.Duration, error) {
	if isNull(p.PollAfter) {
		return 0, nil
	}
	var v float64
	if json.Unmarshal(p.PollAfter, &v) != nil || math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
		return 0, invalid(tool, "poll_after_seconds must be a finite positive number")
	}
	return time.Duration(min(v, MaxPollAfter.Seconds()) * float64(time.Second)), nil
}

// applyNotFound turns error_code task_not_found into a failed task.
func (p *statusAnswer) applyNotFound(s *snapshot) {
	if p.ErrorCode == nil || *p.ErrorCode != "task_not_found" {
		return
	}
	s.Status = StatusFailed
	if s.Error == "" {
		s.Error = "Remote MCP task was not found"
	}
}

func isNull(r json.RawMessage) bool {
	r = bytes.TrimSpace(r)
	return len(r) == 0 || string(r) == "null"
}

// truncateRunes bounds s to n characters without splitting one.
func truncateRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// payloads bounds what a snapshot stores (DeerFlow's _normalize_snapshot).
type payloads struct {
	maxResultBytes int
	previewChars   int
}

// normalize compacts and bounds s's payloads into t: an oversized
// artifact or input request is a ProtocolError; an oversized result becomes
// a preview, never truncated JSON.
func (p payloads) normalize(s *snapshot, t *Task) error {
	var err error
	if t.ResultArtifact, err = boundedJSON("result_artifact", s.Artifact, MaxPayloadBytes); err != nil {
		return err
	}
	if t.InputRequired, err = boundedJSON("input_required", s.InputRequired, MaxPayloadBytes); err != nil {
		return err
	}
	t.Error = truncateRunes(s.Error, MaxErrorChars)
	t.Result, t.ResultPreview, t.ResultTruncated = nil, "", false
	if s.Result == nil {
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, s.Result); err != nil {
		return &ProtocolError{Msg: fmt.Sprintf("MCP task result is not valid JSON: %v", err)}
	}
	if buf.Len() <= p.maxResultBytes {
		t.Result = buf.Bytes()
		return nil
	}
	text := buf.String()
	var str string
	if json.Unmarshal(buf.Bytes(), &str) == nil {
		text = str
	}
	t.ResultPreview, t.ResultTruncated = truncateRunes(text, p.previewChars), true
	return nil
}

func boundedJSON(field string, v json.RawMessage, limit int) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, v); err != nil {
		return nil, &ProtocolError{Msg: fmt.Sprintf("MCP task %s is not valid JSON: %v", field, err)}
	}
	if buf.Len() > limit {
		return nil, &ProtocolError{Msg: fmt.Sprintf("MCP task %s payload exceeds the %d-byte limit", field, limit)}
	}
	return buf.Bytes(), nil
}

// isProtocol reports whether err is permanent.
func isProtocol(err error) bool {
	var pe *ProtocolError
	return errors.As(err, &pe)
}
