package upstream_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// countingServer has a tool "run" that counts its executions. With close
// set, it first ends the call's event stream and asks the client to come
// back after 50ms (SEP-1699), as go-sdk servers do for long calls.
func countingServer(runs *atomic.Int32, close bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "counting"}, nil)
	s.AddTool(&mcp.Tool{Name: "run", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			n := runs.Add(1)
			if close && req.Extra != nil && req.Extra.CloseSSEStream != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: "p", Progress: 1})
				req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 50 * time.Millisecond})
				time.Sleep(100 * time.Millisecond)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "run " + string(rune('0'+n))}}}, nil
		})
	return s
}

// isToolCall reports whether a POST body is a tools/call (the body is
// restored for the next handler).
func isToolCall(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return bytes.Contains(b, []byte(`"method":"tools/call"`))
}

func TestSSEStreamResumedAfterRetry(t *testing.T) {
	var runs, resumes atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return countingServer(&runs, true) },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			resumes.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	u := start(t, urlOptions(ts.URL+"/mcp"))
	if got := callText(t, u, alice1, "run", `{}`); got != "run 1" {
		t.Errorf("result = %q, want run 1", got)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
	if n := resumes.Load(); n != 1 {
		t.Errorf("%d resumptions (GET with Last-Event-ID), want 1", n)
	}
}

// lostAnswer runs a tools/call on the server and then drops the connection
// without delivering the answer: the call ran, its result is lost.
type lostAnswer struct {
	next http.Handler
	drop atomic.Bool
}

func (l *lostAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if l.drop.Load() && isToolCall(r) {
		l.next.ServeHTTP(&discardWriter{h: http.Header{}}, r)
		panic(http.ErrAbortHandler) // the connection closes with nothing written
	}
	l.next.ServeHTTP(w, r)
}

type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}

func TestLostAnswerIsNotRetried(t *testing.T) {
	var runs atomic.Int32
	srv := countingServer(&runs, false)
	la := &lostAnswer{next: streamable(srv)}
	ts := httptest.NewServer(la)
	t.Cleanup(ts.Close)
	u := start(t, urlOptions(ts.URL+"/mcp"))
	la.drop.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := call(ctx, u, alice1, "run", `{}`); err == nil {
		t.Fatal("a call whose answer was lost succeeded")
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times after a lost answer, want exactly once (no retry)", n)
	}
	la.drop.Store(false)
	if got := callText(t, u, alice1, "run", `{}`); got != "run 2" {
		t.Errorf("next call = %q", got)
	}
}

// expireOnce answers the first tools/call with the server's own 404 for an
// unknown session, without running it.
type expireOnce struct {
	next    http.Handler
	expired atomic.Bool
}

func (e *expireOnce) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if isToolCall(r) && e.expired.CompareAndSwap(false, true) {
		http.Error(w, "session not found", http.StatusNotFound)
		return
	}
	e.next.ServeHTTP(w, r)
}

func TestExpiredSessionRetriedOnce(t *testing.T) {
	var runs atomic.Int32
	ts := httptest.NewServer(&expireOnce{next: streamable(countingServer(&runs, false))})
	t.Cleanup(ts.Close)
	u := start(t, urlOptions(ts.URL+"/mcp"))
	if got := callText(t, u, alice1, "run", `{}`); !strings.HasPrefix(got, "run ") {
		t.Errorf("result = %q", got)
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times, want once", n)
	}
}

func urlOptions(url string) upstream.Options {
	return upstream.Options{Name: "web", Transport: upstream.HTTP, URL: url}
}

// TestDiscoveryStreamResumed: the discovery session's own requests resume
// too — here tools/list, whose stream the server ends before answering.
func TestDiscoveryStreamResumed(t *testing.T) {
	var runs, closed atomic.Int32
	srv := countingServer(&runs, false)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if ex := req.GetExtra(); method == "tools/list" && ex != nil && ex.CloseSSEStream != nil && closed.Add(1) == 1 {
				ex.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 20 * time.Millisecond})
				time.Sleep(50 * time.Millisecond)
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	u := start(t, urlOptions(ts.URL+"/mcp"))
	if tools := u.Tools(); len(tools) != 1 || tools[0].Name != "run" {
		t.Errorf("tools = %+v", tools)
	}
	if closed.Load() == 0 {
		t.Error("the server never ended a tools/list stream early")
	}
}
