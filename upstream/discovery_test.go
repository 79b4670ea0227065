package upstream_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
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
