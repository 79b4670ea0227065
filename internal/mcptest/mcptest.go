// Package mcptest provides real MCP servers for mcp-mux's tests: a go-sdk
// server with a fixed set of tools, served over Streamable HTTP, legacy SSE,
// or stdio (the test binary re-executes itself as the server process),
// optionally traced (Trace: a SERVER span per request, continuing the
// caller's trace context, exported over OTLP).
package mcptest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Environment variables that turn a re-executed test binary into a stdio server.
const (
	envStdio      = "MCPTEST_STDIO_SERVER" // server name
	envBanner     = "MCPTEST_BANNER"       // print a non-JSON line on stdout first
	envGrandchild = "MCPTEST_GRANDCHILD"   // start a long sleep child first
	envHang       = "MCPTEST_HANG"         // never answer anything
	envGarble     = "MCPTEST_GARBLE"       // precede every message with broken lines
	envCallsDir   = "MCPTEST_CALLS_DIR"    // note each tools/call's arrival there
	envEchoEnv    = "MCPTEST_ECHO_ENV"     // print this variable's value on stderr first
)

// GarbleMarker is in the content of the broken lines a Garble server prints.
const GarbleMarker = "GARBLED-LINE-CONTENT-7f3a"

// garbleWriter precedes each message the server writes with a truncated
// JSON-RPC line (cut where a value is due, so a stream decoder takes the
// next message as that value) and a line that is not valid JSON.
type garbleWriter struct{ w io.Writer }

func (g garbleWriter) Write(p []byte) (int, error) {
	junk := `{"jsonrpc":"2.0","id":"garbled","result":{"marker":"` + GarbleMarker + `","next":` + "\n" +
		`{` + GarbleMarker + ` is not JSON}` + "\n"
	if _, err := io.WriteString(g.w, junk); err != nil {
		return 0, err
	}
	return g.w.Write(p)
}

// EchoArgs are the arguments of the echo tool.
type EchoArgs struct {
	Text string `json:"text"`
}

// AddArgs are the arguments of the add tool.
type AddArgs struct {
	A int `json:"a"`
	B int `json:"b"`
}

// SumResult is the structured result of the add tool.
type SumResult struct {
	Sum int `json:"sum"`
}

// SleepArgs are the arguments of the sleep tool.
type SleepArgs struct {
	MS int `json:"ms"`
}

// NewServer returns a go-sdk MCP server named name with these tools:
// echo(text), add(a,b) with structured output, pid() (the serving process id),
// headers() (the HTTP request headers it received, sorted "Name: value" lines),
// sleep(ms) (honours cancellation), fail() (an isError result), count() (a
// per-session counter), version() (the protocol version of the request: its
// _meta's, or its session's), the interactive tools progress, log, sample and elicit
// (see addInteractiveTools) and, when extra names are given, one trivial tool per name.
func NewServer(name string, extra ...string) *mcp.Server {
	return newServer(name, nil, extra...)
}

// newServer is NewServer with the SDK's server options.
func newServer(name string, opts *mcp.ServerOptions, extra ...string) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: name, Version: "test"}, opts)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in EchoArgs) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Add two integers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in AddArgs) (*mcp.CallToolResult, SumResult, error) {
			return nil, SumResult{Sum: in.A + in.B}, nil
		})
	s.AddTool(&mcp.Tool{Name: "pid", Description: "Process id.", InputSchema: emptySchema()},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(fmt.Sprint(os.Getpid())), nil
		})
	s.AddTool(&mcp.Tool{Name: "headers", Description: "Request headers.", InputSchema: emptySchema()},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var lines []string
			if req.Extra != nil {
				for k, vs := range req.Extra.Header {
					for _, v := range vs {
						lines = append(lines, k+": "+v)
					}
				}
			}
			sort.Strings(lines)
			return text(strings.Join(lines, "\n")), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sleep", Description: "Sleep, honouring cancellation."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in SleepArgs) (*mcp.CallToolResult, any, error) {
			select {
			case <-time.After(time.Duration(in.MS) * time.Millisecond):
				return text("slept"), nil, nil
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		})
	s.AddTool(&mcp.Tool{Name: "version", Description: "The request's protocol version.", InputSchema: emptySchema()},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return text(req.ProtocolVersion()), nil
		})
	s.AddTool(&mcp.Tool{Name: "fail", Description: "Always fails.", InputSchema: emptySchema()},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "it failed"}}}, nil
		})
	counters := make(map[*mcp.ServerSession]*atomic.Int64)
	var mu sync.Mutex
	s.AddTool(&mcp.Tool{Name: "count", Description: "Per-session counter.", InputSchema: emptySchema()},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			mu.Lock()
			c := counters[req.Session]
			if c == nil {
				c = new(atomic.Int64)
				counters[req.Session] = c
			}
			mu.Unlock()
			return text(fmt.Sprint(c.Add(1))), nil
		})
	addInteractiveTools(s)
	for _, n := range extra {
		s.AddTool(&mcp.Tool{Name: n, Description: "Extra tool " + n, InputSchema: emptySchema()},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) { return text(n), nil })
	}
	return s
}

func emptySchema() map[string]any { return map[string]any{"type": "object"} }

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// ServeHTTP serves s over Streamable HTTP; the endpoint is URL + "/mcp".
func ServeHTTP(t testing.TB, s *mcp.Server) *httptest.Server {
	t.Helper()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	ts := httptest.NewServer(mux)
	t.Cleanup(func() { ts.Close(); closeSessions(s) })
	return ts
}

// ServeHTTPBothEras serves s over Streamable HTTP in both eras, as go-sdk
// documents it: requests of 2026-07-28 or later (by their
// Mcp-Protocol-Version header) go to a stateless handler, the others to a
// stateful one. The endpoint is URL + "/mcp".
func ServeHTTPBothEras(t testing.TB, s *mcp.Server) *httptest.Server {
	t.Helper()
	stateful := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	stateless := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Protocol-Version") >= "2026-07-28" {
			stateless.ServeHTTP(w, r)
			return
		}
		stateful.ServeHTTP(w, r)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(func() { ts.Close(); closeSessions(s) })
	return ts
}

// closeSessions ends what a stopped server process would take with it:
// sessions whose clients never said goodbye (an initialize abandoned by a
// client that gave up, say).
func closeSessions(s *mcp.Server) {
	for ss := range s.Sessions() {
		_ = ss.Close()
	}
}

// ServeSSE serves s over the legacy HTTP+SSE transport; the endpoint is URL + "/sse".
func ServeSSE(t testing.TB, s *mcp.Server) *httptest.Server {
	t.Helper()
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/sse", h)
	ts := httptest.NewServer(mux)
	t.Cleanup(func() { ts.Close(); closeSessions(s) })
	return ts
}

// Hung returns an HTTP server that accepts requests and never answers.
func Hung(t testing.TB) *httptest.Server {
	t.Helper()
	stop := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	t.Cleanup(func() { close(stop); ts.Close() })
	return ts
}

// StdioOptions choose how a re-executed stdio server misbehaves.
type StdioOptions struct {
	Banner     bool // print a non-JSON line on stdout before serving
	Grandchild bool // start a long-running child process before serving
	Hang       bool // never answer initialize
	Garble     bool // write broken lines before every message (see GarbleMarker)
	// CallsDir, when set, is a directory where the server creates a file
	// named for each tool whose tools/call reached it (before the tool
	// runs; <tool>.cancelled when the call was cancelled): a test waits for
	// it instead of guessing with a sleep.
	CallsDir string
	// First is how the server takes a first message other than initialize
	// (FirstExit, FirstRefuse); empty serves both eras (go-sdk's default).
	First string
	// StartsDir, when set, is a directory where each server process creates
	// a file when it starts (see Starts).
	StartsDir string
	// SubsDir, when set, makes the server one with a single subscribable
	// resource (SubsResource), noting subscriptions in that directory.
	SubsDir string
	// MethodsDir, when set, is a directory where each server process notes
	// every method it receives (see Received).
	MethodsDir string
	// StartDelay makes each process wait this long after it starts before
	// it reads stdin (as npx does while npm downloads the server).
	StartDelay time.Duration
	// EchoEnv, when set, names an environment variable whose value the
	// server prints on stderr when it starts (a server quoting its
	// credential in its stderr, which the mux must scrub from its log).
	EchoEnv string
	// TraceEndpoint, when set, makes the server a traced one (see Trace):
	// each request's SERVER span is exported to the OTLP/HTTP receiver at
	// this base URL before the request is answered.
	TraceEndpoint string
}

// StdioServer returns the command, args and env that run the test binary as
// a stdio MCP server named name. The calling package's TestMain must call
// MaybeServeStdio first.
func StdioServer(name string, o StdioOptions) (string, []string, map[string]string) {
	env := map[string]string{envStdio: name}
	if o.Banner {
		env[envBanner] = "1"
	}
	if o.Grandchild {
		env[envGrandchild] = "1"
	}
	if o.Hang {
		env[envHang] = "1"
	}
	if o.Garble {
		env[envGarble] = "1"
	}
	if o.CallsDir != "" {
		env[envCallsDir] = o.CallsDir
	}
	if o.First != "" {
		env[envFirst] = o.First
	}
	if o.StartsDir != "" {
		env[envStartsDir] = o.StartsDir
	}
	if o.SubsDir != "" {
		env[envSubsDir] = o.SubsDir
	}
	if o.MethodsDir != "" {
		env[envMethodsDir] = o.MethodsDir
	}
	if o.StartDelay > 0 {
		env[envStartDelay] = o.StartDelay.String()
	}
	if o.EchoEnv != "" {
		env[envEchoEnv] = o.EchoEnv
	}
	if o.TraceEndpoint != "" {
		env[envTraceEndpoint] = o.TraceEndpoint
	}
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exe, []string{"-test.run=^$"}, env
}

// MaybeServeStdio serves as a stdio MCP server and exits when the process was
// started by StdioServer; otherwise it returns at once. Call it first in TestMain.
func MaybeServeStdio() {
	name := os.Getenv(envStdio)
	if name == "" {
		return
	}
	if dir := os.Getenv(envStartsDir); dir != "" {
		noteStart(dir)
	}
	if script := os.Getenv(envScript); script != "" {
		serveScript(script, os.Stdin, os.Stdout)
	}
	if os.Getenv(envGrandchild) != "" {
		cmd := exec.Command("sleep", "1000")
		if err := cmd.Start(); err == nil {
			fmt.Fprintf(os.Stderr, "grandchild pid %d\n", cmd.Process.Pid)
		}
	}
	if os.Getenv(envBanner) != "" {
		fmt.Println("Test MCP server starting up (this line is not JSON)")
	}
	if os.Getenv(envHang) != "" {
		time.Sleep(time.Hour)
	}
	if d, err := time.ParseDuration(os.Getenv(envStartDelay)); err == nil {
		time.Sleep(d)
	}
	if v := os.Getenv(envEchoEnv); v != "" {
		fmt.Fprintf(os.Stderr, "starting with %s=%s\n", v, os.Getenv(v))
	}
	fmt.Fprintln(os.Stderr, "stdio test server ready")
	var t mcp.Transport = &mcp.StdioTransport{}
	if os.Getenv(envGarble) != "" {
		t = &mcp.IOTransport{Reader: os.Stdin, Writer: nopCloser{garbleWriter{os.Stdout}}}
	}
	if first := os.Getenv(envFirst); first != "" {
		t = firstTransport(first)
	}
	s := NewServer(name)
	if dir := os.Getenv(envSubsDir); dir != "" {
		s = subsServer(name, dir)
	}
	if dir := os.Getenv(envCallsDir); dir != "" {
		s.AddReceivingMiddleware(noteCalls(dir))
	}
	if dir := os.Getenv(envMethodsDir); dir != "" {
		s.AddReceivingMiddleware(noteMethods(dir))
	}
	stopTracing := func() {}
	if ep := os.Getenv(envTraceEndpoint); ep != "" {
		tp, err := tracerProvider(name, ep)
		if err != nil {
			fmt.Fprintln(os.Stderr, "tracing:", err)
			os.Exit(1)
		}
		s.AddReceivingMiddleware(traceRequests(tp))
		stopTracing = func() { _ = tp.Shutdown(context.Background()) }
	}
	err := s.Run(context.Background(), t)
	stopTracing()
	if err != nil {
		os.Exit(1)
	}
	os.Exit(0)
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// noteCalls creates dir/<tool> when a tools/call for tool arrives, before
// the tool runs, and dir/<tool>.cancelled when the call was cancelled.
func noteCalls(dir string) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			p, ok := req.GetParams().(*mcp.CallToolParamsRaw)
			if !ok || method != "tools/call" || filepath.Base(p.Name) != p.Name {
				return next(ctx, method, req)
			}
			_ = os.WriteFile(filepath.Join(dir, p.Name), nil, 0o600)
			res, err := next(ctx, method, req)
			if ctx.Err() != nil {
				_ = os.WriteFile(filepath.Join(dir, p.Name+".cancelled"), nil, 0o600)
			}
			return res, err
		}
	}
}
