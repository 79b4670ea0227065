package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// A server that never answers the notifications/cancelled of an abandoned
// call does not hold Close up: Close cuts the post short after its grace.
func TestCloseCutsBackgroundPostsShort(t *testing.T) {
	srv := mcptest.NewServer("web")
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	gotCall, gotCancel, cut := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	signal := func(c chan struct{}) {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case bytes.Contains(body, []byte(`"notifications/cancelled"`)):
			signal(gotCancel)
			<-r.Context().Done() // hung: never answers
			signal(cut)
			// Now let the server see it, so that its sleep ends.
			r2 := r.WithContext(context.Background())
			r2.Body = io.NopCloser(bytes.NewReader(body))
			sdk.ServeHTTP(httptest.NewRecorder(), r2)
			return
		case bytes.Contains(body, []byte(`"tools/call"`)):
			signal(gotCall)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		sdk.ServeHTTP(w, r)
	}))
	defer ts.Close()
	defer ts.CloseClientConnections() // on failure: end the hung post, so ts.Close returns
	defer func() {
		for ss := range srv.Sessions() {
			_ = ss.Close()
		}
	}()
	u, err := New(Options{Name: "web", Transport: HTTP, URL: ts.URL + "/mcp", InitTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	u.async.timeout = time.Hour // only Close can end the post
	u.Start()
	wait := func(c <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-c:
		case <-time.After(60 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	wait(u.Discovered(), "discovery")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = u.CallTool(ctx, Call{Key: Key{User: "alice"}, Params: json.RawMessage(`{"name":"sleep","arguments":{"ms":600000}}`)})
	}()
	wait(gotCall, "the call to reach the server")
	cancel()
	wait(done, "the cancelled call to return")
	wait(gotCancel, "notifications/cancelled to reach the server")
	closed := make(chan struct{})
	go func() { _ = u.Close(); close(closed) }()
	wait(closed, "Close, while a post to a hung server was pending")
	wait(cut, "the server to see the post abandoned")
}

// A server request answered with an error reaches an HTTP server with the
// error's code, message and data, as on the stdio/SSE and SDK paths.
func TestRespondKeepsErrorData(t *testing.T) {
	got := make(chan []byte, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- b
		w.WriteHeader(http.StatusAccepted)
	}))
	defer ts.Close()
	d := &direct{url: ts.URL, client: ts.Client(), header: http.Header{}, async: &background{}}
	d.respond(json.RawMessage(`"s-1"`), nil, fmt.Errorf("elicitation: %w", &wire.Error{Code: -32042, Message: "no", Data: json.RawMessage(`{"x":[1]}`)}))
	want := `{"jsonrpc":"2.0","id":"s-1","error":{"code":-32042,"message":"no","data":{"x":[1]}}}`
	if b := <-got; string(bytes.TrimSpace(b)) != want {
		t.Fatalf("posted %s, want %s", b, want)
	}
}
