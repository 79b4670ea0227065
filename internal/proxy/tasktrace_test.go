package proxy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// TestTaskPollLinksToSubmitTrace: a durable task submitted inside a
// caller's trace on replica A is polled to completion by replica B (the
// two share a Redis task store; A is closed before its first poll is due).
// Each of B's polls is an INTERNAL span "poll task job", the root of a new
// trace, linked to the submit's span (the mux SERVER span on A, in the
// caller's trace), and the status tool's CLIENT span is its child. Each
// replica exports to its own receiver, so A's polling nothing is checked.
func TestTaskPollLinksToSubmitTrace(t *testing.T) {
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "20") // the batch processor exports within 20 ms
	redis := mcptest.StartRedis(t, false)
	store := func() taskpoll.Store {
		c, err := storeclient.Dial(redis.URL())
		if err != nil {
			t.Fatal(err)
		}
		return taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: c, KeyPrefix: "tasktrace:"})
	}
	up := &mcptest.TaskServer{PollsToComplete: 2}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	cfg := `{"mcpServers": {"jobs": ` + mcptest.TaskServerJSON(upTS.URL+"/mcp", "") + `}, "mcp_tasks": {"enabled": true}}`
	traced := func(r *otlptest.Receiver, poll time.Duration) func(*proxy.Options) {
		return func(o *proxy.Options) {
			o.Telemetry = telemetry.Options{Enabled: true, Endpoint: r.Endpoint(), SampleRatio: 1, Version: "test",
				Env: func(string) (string, bool) { return "", false }}
			o.TaskConfig.PollInterval = poll
		}
	}
	recvA, recvB := otlptest.Start(t), otlptest.Start(t)
	// A schedules the task's first poll 3 s (±10 %) after the submit.
	srvA, tsA := taskMuxWith(t, cfg, store(), traced(recvA, 3*time.Second))
	srvB, _ := taskMuxWith(t, cfg, store(), traced(recvB, 20*time.Millisecond))

	caller, meta := callerTrace(t, recvA)
	callerTraceID := caller.SpanContext().TraceID().String()
	mm := mcp.Meta{}
	for k, v := range meta {
		mm[k] = v
	}
	res, err := connect(t, tsA.URL, nil).CallTool(context.Background(), &mcp.CallToolParams{Name: "jobs_submit_job", Arguments: map[string]any{"input": "x"}, Meta: mm})
	if err != nil || res.IsError {
		t.Fatalf("submit: %v %+v", err, res)
	}
	caller.End()
	id, _ := res.StructuredContent.(map[string]any)["task_id"].(string)
	if !taskpoll.ValidID(id) {
		t.Fatalf("submit result %+v", res.StructuredContent)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srvA.Close(ctx); err != nil { // stops A's poller, flushes A's spans
		t.Fatal(err)
	}
	waitUntil(t, func() bool {
		tk, err := srvB.Tasks().Store().Get(ctx, id)
		return err == nil && tk.Status == taskpoll.StatusCompleted
	})

	// The submit's span: the mux SERVER span on A, in the caller's trace.
	submit := namedSpan(t, otlptest.InTrace(recvA.Spans(), callerTraceID), "SERVER", "mcp-mux", "tools/call jobs_submit_job")
	for _, s := range recvA.Spans() {
		if s.Name == "poll task job" {
			t.Fatalf("replica A polled the task, so the test proves nothing:\n%s", otlptest.Dump(recvA.Spans()))
		}
	}
	// Three status calls complete the task (PollsToComplete 2): three poll
	// spans on B, each with its status call's CLIENT span as its child.
	isPoll := func(s otlptest.Span) bool { return s.Kind == "INTERNAL" && s.Name == "poll task job" }
	spans := recvB.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool {
		polls := 0
		for _, p := range all {
			if isPoll(p) && count(otlptest.InTrace(all, p.TraceID), "CLIENT", "mcp-mux", "tools/call job_status") == 1 {
				polls++
			}
		}
		return polls == 3
	})
	for _, p := range spans {
		if !isPoll(p) {
			continue
		}
		in := otlptest.InTrace(spans, p.TraceID)
		if p.ParentSpanID != "" || p.TraceID == callerTraceID {
			t.Errorf("a poll span is not the root of a trace of its own: %s", p)
		}
		if !slices.ContainsFunc(p.Links, func(l otlptest.Link) bool { return l.TraceID == callerTraceID && l.SpanID == submit.SpanID }) {
			t.Errorf("a poll span does not link to the submit's span %s in trace %s:\n%s", submit.SpanID, callerTraceID, otlptest.Dump(in))
		}
		wantAttrs(t, p, map[string]any{"mcp_mux.task.id": id, "mcp_mux.server": "jobs", "gen_ai.tool.name": "job_status"})
		if client := namedSpan(t, in, "CLIENT", "mcp-mux", "tools/call job_status"); client.ParentSpanID != p.SpanID {
			t.Errorf("the status call's CLIENT span is not the poll span's child:\n%s", otlptest.Dump(in))
		}
	}
}
