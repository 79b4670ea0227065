package taskpoll

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The extension's view of every DeerFlow status.
func TestExtensionView(t *testing.T) {
	s := newService(t, boltStore(t), &remote{}, Config{PollInterval: 2 * time.Second, InputRequiredPollInterval: 30 * time.Second})
	at := time.Date(2026, 8, 1, 10, 0, 0, 0, time.UTC)
	base := Task{ID: NewID(), User: "u", Server: "secret-server", RemoteID: "remote-secret", Name: "job", CreatedAt: at, UpdatedAt: at.Add(time.Minute)}
	cases := []struct {
		name string
		edit func(*Task)
		want []string // substrings of the JSON
		not  []string
	}{
		{"pending", func(t *Task) { t.Status = StatusPending }, []string{`"status":"working"`, `"ttlMs":604800000`, `"pollIntervalMs":2000`, `"createdAt":"2026-08-01T10:00:00Z"`, `"lastUpdatedAt":"2026-08-01T10:01:00Z"`}, []string{"result", "error", "inputRequests"}},
		{"submitted", func(t *Task) { t.Status = StatusSubmitted }, []string{`"status":"working"`}, nil},
		{"own retention", func(t *Task) { t.Status, t.TTL = StatusCompleted, 90*time.Second }, []string{`"ttlMs":90000`}, nil},
		{"input_required", func(t *Task) {
			t.Status, t.InputRequired = StatusInputRequired, json.RawMessage(`{"message":"approve at https://x","kind":"approval"}`)
		}, []string{`"status":"input_required"`, `"inputRequests":{}`, `"statusMessage":"approve at https://x"`, `"io.github.mcp-mux/input_required":{"message":"approve at https://x","kind":"approval"}`, `"pollIntervalMs":30000`}, nil},
		{"completed", func(t *Task) {
			t.Status, t.Result, t.ResultArtifact = StatusCompleted, json.RawMessage(`{"ok":true}`), json.RawMessage(`{"uri":"s3://b/k","mime_type":"text/csv"}`)
		}, []string{`"status":"completed"`, `"structuredContent":{"ok":true}`, `"text":"{\"ok\":true}"`, `{"type":"resource_link","uri":"s3://b/k","name":"result_artifact","mimeType":"text/csv"}`}, []string{`"error"`}},
		{"completed scalar", func(t *Task) { t.Status, t.Result = StatusCompleted, json.RawMessage(`"done"`) }, []string{`"text":"\"done\""`}, []string{"structuredContent"}},
		{"truncated", func(t *Task) { t.Status, t.ResultTruncated, t.ResultPreview = StatusCompleted, true, "abc" }, []string{`"text":"abc"`, `"io.github.mcp-mux/result_truncated":true`}, nil},
		{"failed", func(t *Task) { t.Status, t.Error = StatusFailed, "boom" }, []string{`"status":"failed"`, `"error":{"code":-32603,"message":"boom"}`, `"statusMessage":"boom"`}, []string{`"result"`}},
		{"remote failure", func(t *Task) { t.Status, t.Error, t.RemoteFailure = StatusFailed, "quota", true }, []string{`"status":"completed"`, `"result":{"content":[{"type":"text","text":"quota"}],"isError":true}`}, []string{`"error"`}},
		{"cancelled", func(t *Task) { t.Status = StatusCancelled }, []string{`"status":"cancelled"`}, []string{`"result"`, `"error"`}},
	}
	for _, c := range cases {
		task := base
		c.edit(&task)
		b, _ := json.Marshal(s.ExtensionView(&task))
		for _, w := range append(c.want, `"taskId":"`+task.ID+`"`) {
			if !strings.Contains(string(b), w) {
				t.Errorf("%s: %s lacks %s", c.name, b, w)
			}
		}
		for _, n := range append(c.not, "secret") {
			if strings.Contains(string(b), n) {
				t.Errorf("%s: %s has %s", c.name, b, n)
			}
		}
	}
}
