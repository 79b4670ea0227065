package upstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// brokenLists is a server that advertises prompts and resources but
// answers resources/templates/list with -32601 and prompts/list with an
// internal error.
func brokenLists() *mcp.Server {
	s := mcptest.NewServer("broken")
	s.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	s.AddResource(&mcp.Resource{URI: "mem://r", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "resources/templates/list":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
			case "prompts/list":
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "prompts are broken"}
			}
			return next(ctx, method, req)
		}
	})
	return s
}

func TestOptionalListsTolerated(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	srv := brokenLists()
	o := httpOptions(t, srv)
	o.Logger = newLogger(logs)
	u := start(t, o)
	l := u.Lists()
	if len(l.Tools) == 0 {
		t.Fatal("the server's tools were not served")
	}
	if len(l.Resources) != 1 || l.Resources[0].Key != "mem://r" {
		t.Errorf("resources = %+v", l.Resources)
	}
	if len(l.Templates) != 0 || len(l.Prompts) != 0 {
		t.Errorf("failed lists not empty: templates %d prompts %d", len(l.Templates), len(l.Prompts))
	}
	// A later refresh (the server announces a change) warns no more.
	srv.AddTool(&mcp.Tool{Name: "late", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	waitFor(t, 10*time.Second, "the refreshed tool list", func() bool {
		for _, tl := range u.Tools() {
			if tl.Name == "late" {
				return true
			}
		}
		return false
	})
	out := logs.String()
	for _, m := range []string{"resources/templates/list", "prompts/list"} {
		if n := strings.Count(out, `"method":"`+m+`"`); n != 1 {
			t.Errorf("%d warnings for %s, want 1:\n%s", n, m, out)
		}
	}
}

func TestServerWithoutToolsServesPrompts(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "prompts-only"}, nil)
	s.AddPrompt(&mcp.Prompt{Name: "hello"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	u := start(t, httpOptions(t, s))
	l := u.Lists()
	if len(l.Tools) != 0 || len(l.Prompts) != 1 || l.Prompts[0].Key != "hello" {
		t.Errorf("lists = tools %d prompts %+v", len(l.Tools), l.Prompts)
	}
}

// TestFailureReasonCarriesStderr: a stdio server that dies at start has
// its last stderr lines in its failure reason, and they are logged once,
// not again on every retry.
func TestFailureReasonCarriesStderr(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	o := upstream.Options{Name: "dies", Transport: upstream.Stdio, Command: "/bin/sh",
		Args:     []string{"-c", "echo 'fatal: no config file' >&2; exit 3"},
		RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond, Logger: newLogger(logs)}
	u := startNoWait(t, o)
	recv(t, u.Discovered(), 20*time.Second, "first discovery")
	waitFor(t, 10*time.Second, "a few retries", func() bool {
		return strings.Count(logs.String(), "upstream still unavailable") >= 3
	})
	err := u.Err()
	if err == nil || !strings.Contains(err.Error(), "stderr: fatal: no config file") {
		t.Errorf("failure reason = %v, want the stderr line appended", err)
	}
	if n := strings.Count(logs.String(), `"@message":"fatal: no config file"`); n != 1 {
		t.Errorf("the stderr line was logged %d times across retries, want once:\n%s", n, logs)
	}
	if got := u.Stderr(); len(got) != 1 || !strings.HasPrefix(got[0], "fatal: no config file (×") { // once, with its count
		t.Errorf("Stderr() = %q", got)
	}
}

// TestStderrScrubbed: a server that prints its credentials on stderr does
// not put them in the failure reason.
func TestStderrScrubbed(t *testing.T) {
	logs := &mcptest.LogBuffer{}
	const token = "tok-9f8e7d6c5b4a"
	o := upstream.Options{Name: "leaky", Transport: upstream.Stdio, Command: "/bin/sh",
		Args: []string{"-c", `echo "auth failed for token $API_TOKEN" >&2; exit 3`}, Env: map[string]string{"API_TOKEN": token},
		RetryMin: time.Hour, Logger: newLogger(logs)}
	u := startNoWait(t, o)
	recv(t, u.Discovered(), 20*time.Second, "first discovery")
	err := u.Err()
	if err == nil || !strings.Contains(err.Error(), "auth failed for token") || strings.Contains(err.Error(), token) {
		t.Errorf("failure reason = %v", err)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the token reached the log:\n%s", logs)
	}
}
