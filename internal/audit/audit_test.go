package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// readRecords reads a JSON-lines file.
func readRecords(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r map[string]any
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("a line is not one JSON record: %q: %v", sc.Text(), err)
		}
		out = append(out, r)
	}
	return out
}

// traced is a context with a request id and a sampled span context.
func traced() (context.Context, string) {
	tid := trace.TraceID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(reqid.With(context.Background(), "req-1"), sc), tid.String()
}

func TestRecordsByDetail(t *testing.T) {
	ctx, tid := traced()
	var sc secret.Scrubber
	sc.Add("known-cred-value")
	args := json.RawMessage(`{"city":"Paris","api_key":"k-123456","note":"with known-cred-value inside"}`)
	for _, detail := range []string{DetailMinimal, DetailStandard, DetailFull} {
		t.Run(detail, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			ids := secret.NewIDHash("replicas-share-this-key")
			a, err := New(Options{Enabled: true, Output: path, Detail: detail, IDs: ids})
			if err != nil {
				t.Fatal(err)
			}
			e := a.Start(ToolCall)
			e.Tool, e.Server, e.RawTool, e.BytesIn = "web_echo", "web", "echo", len(args)
			e.Arguments(args, &sc)
			a.Finish(ctx, &e, Caller{User: "alice", Thread: "t1", Session: "s1", Protocol: "2025-11-25"}, json.RawMessage(`{"content":[]}`), nil)
			d := a.Start(ToolCall)
			d.Tool = "web_rm"
			d.Deny("guardrail")
			a.Finish(ctx, &d, Caller{User: "alice"}, json.RawMessage(`{"content":[],"isError":true}`), nil)
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			recs := readRecords(t, path)
			if len(recs) != 2 {
				t.Fatalf("%d records, want 2", len(recs))
			}
			r := recs[0]
			if r["kind"] != "tools/call" || r["tool"] != "web_echo" || r["server"] != "web" || r["outcome"] != "ok" ||
				r["caller"] != ids.Of("alice") || r["time"] == nil || r["duration_ms"] == nil {
				t.Errorf("record = %v", r)
			}
			if recs[1]["outcome"] != "denied" {
				t.Errorf("denied call's record = %v", recs[1])
			}
			_, hasTrace := r["trace_id"]
			_, hasArgs := r["arguments"]
			switch detail {
			case DetailMinimal:
				if hasTrace || r["thread"] != nil || r["bytes_in"] != nil || hasArgs || recs[1]["denial_reason"] != nil {
					t.Errorf("a minimal record has more than the minimum: %v", r)
				}
			case DetailStandard:
				if r["trace_id"] != tid || r["request_id"] != "req-1" || r["thread"] != "t1" || r["session"] != "s1" ||
					r["raw_tool"] != "echo" || r["bytes_in"] != float64(len(args)) || hasArgs || recs[1]["denial_reason"] != "guardrail" {
					t.Errorf("standard record = %v / %v", r, recs[1])
				}
			case DetailFull:
				want := map[string]any{"city": "Paris", "api_key": secret.Redacted, "note": "with " + secret.Redacted + " inside"}
				got, _ := r["arguments"].(map[string]any)
				if len(got) != len(want) || got["city"] != want["city"] || got["api_key"] != want["api_key"] || got["note"] != want["note"] {
					t.Errorf("arguments = %v, want %v", r["arguments"], want)
				}
			}
			raw, _ := os.ReadFile(path)
			for _, s := range []string{"k-123456", "known-cred-value", `"alice"`} {
				if strings.Contains(string(raw), s) {
					t.Errorf("%q is in the records: %s", s, raw)
				}
			}
			if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
				t.Errorf("records file mode %v, want 0600", st.Mode().Perm())
			}
		})
	}
}

func TestOutcomes(t *testing.T) {
	a, err := New(Options{Slow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		res             string
		err             error
		outcome, errTyp string
	}{
		{`{"content":[]}`, nil, OK, ""},
		{`{"content":[],"isError":true}`, nil, ToolError, "tool_error"},
		{``, &jsonrpc.Error{Code: -32602, Message: "unknown tool"}, Error, "-32602"},
		{``, context.Canceled, Error, "cancelled"},
		{``, errors.New("boom"), Error, "error"},
	} {
		e := a.Start(ToolCall)
		e.Tool = "t"
		a.Finish(context.Background(), &e, Caller{}, json.RawMessage(c.res), c.err)
		if e.Outcome != c.outcome || e.ErrorType != c.errTyp {
			t.Errorf("%s %v: outcome %q %q, want %q %q", c.res, c.err, e.Outcome, e.ErrorType, c.outcome, c.errTyp)
		}
	}
	slow, failed := a.Recent()
	if len(slow) != 0 || len(failed) != 4 || failed[0].ErrorType != "error" || failed[3].Outcome != ToolError {
		t.Errorf("recent: slow %v, failed %+v", slow, failed)
	}
}

// The recent rings hold the last 20 slow and failed calls, newest first,
// with records off as well.
func TestRecent(t *testing.T) {
	a, err := New(Options{Slow: time.Nanosecond, UserID: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, tid := traced()
	for i := range 25 {
		e := a.Start(PromptGet)
		e.Prompt = "p" + string(rune('a'+i))
		a.Finish(ctx, &e, Caller{User: "bob"}, nil, nil)
	}
	slow, failed := a.Recent()
	if len(slow) != recentCalls || len(failed) != 0 || slow[0].Target != "py" || slow[recentCalls-1].Target != "pf" ||
		slow[0].TraceID != tid || slow[0].Caller != "bob" {
		t.Errorf("slow = %+v", slow)
	}
	var nilA *Auditor
	e := nilA.Start(ToolCall)
	nilA.Finish(ctx, &e, Caller{}, nil, errors.New("x"))
	if s, f := nilA.Recent(); s != nil || f != nil || nilA.Close() != nil {
		t.Error("a nil Auditor did something")
	}
}

// An anonymous caller (auth mode none: every caller is the default user)
// is marked anonymous in the recent calls, without the default user's
// hash, which says nothing; its record keeps the hash like any other.
func TestRecentAnonymous(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	ids := secret.NewIDHash("k")
	a, err := New(Options{Enabled: true, Output: path, Slow: time.Hour, IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []Caller{{User: "default", Anonymous: true}, {User: "alice"}} {
		e := a.Start(ToolCall)
		e.Tool = "t"
		a.Finish(context.Background(), &e, c, nil, errors.New("x"))
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	_, failed := a.Recent()
	if len(failed) != 2 || failed[1].Caller != "" || !failed[1].Anonymous || failed[0].Caller != ids.Of("alice") || failed[0].Anonymous {
		t.Errorf("recent = %+v", failed)
	}
	if recs := readRecords(t, path); len(recs) != 2 || recs[0]["caller"] != ids.Of("default") || recs[0]["anonymous"] != nil {
		t.Errorf("records = %v", recs)
	}
}

// A file past its bound moves to .1 and a new one starts; a record that
// cannot be queued (here: after Close) is dropped and counted.
func TestRotationAndDrops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.jsonl")
	a, err := New(Options{Enabled: true, Output: path, MaxFileBytes: 2000, Buffer: 1000})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := a.Register(reg); err != nil {
		t.Fatal(err)
	}
	for range 200 {
		e := a.Start(ResourceRead)
		e.URI = "file:///" + strings.Repeat("x", 50)
		a.Finish(context.Background(), &e, Caller{}, nil, nil)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	e := a.Start(ResourceRead)
	a.Finish(context.Background(), &e, Caller{}, nil, nil) // after Close: dropped, no panic
	written := value(a.w.written)
	dropped := value(a.w.dropped)
	if written != 200 || dropped != 1 {
		t.Errorf("written %v, dropped %v; want 200 and the one after Close", written, dropped)
	}
	cur, old := readRecords(t, path), readRecords(t, path+".1")
	if len(old) == 0 || float64(len(cur)+len(old)) > written {
		t.Errorf("rotation: %d records in the file, %d in .1, %v written", len(cur), len(old), written)
	}
	if st, _ := os.Stat(path + ".1"); st.Size() > 2000+400 {
		t.Errorf("rotated file is %d bytes, bound 2000", st.Size())
	}
}

func TestBadOutput(t *testing.T) {
	for _, out := range []string{"relative/path.jsonl", filepath.Join(t.TempDir(), "no-such-dir", "a.jsonl")} {
		if _, err := New(Options{Enabled: true, Output: out}); err == nil || !strings.Contains(err.Error(), "audit") {
			t.Errorf("output %q: err = %v", out, err)
		}
	}
}

// value is a counter's value.
func value(c prometheus.Counter) float64 {
	var m dto.Metric
	_ = c.Write(&m)
	return m.GetCounter().GetValue()
}
