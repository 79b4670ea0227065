package mcptest

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TagArgs carry a caller-chosen tag that the interactive tools echo in
// everything they send back, so tests can tell whose traffic is whose.
type TagArgs struct {
	Tag string `json:"tag"`
}

// addInteractiveTools registers tools that talk back to the client while
// they run: progress(tag) sends three progress notifications, log(tag) sends
// a log message, sample(tag) asks the client for a sampling completion and
// elicit(tag) asks it for input; each returns what it got.
func addInteractiveTools(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "progress", Description: "Report progress three times."},
		func(ctx context.Context, req *mcp.CallToolRequest, in TagArgs) (*mcp.CallToolResult, any, error) {
			tok := req.Params.GetProgressToken()
			for i := 1; i <= 3; i++ {
				if tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
						ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("%s %d", in.Tag, i)})
				}
			}
			return text("progress done " + in.Tag), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "log", Description: "Send a log message."},
		func(ctx context.Context, req *mcp.CallToolRequest, in TagArgs) (*mcp.CallToolResult, any, error) {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Logger: "mcptest", Data: "log " + in.Tag})
			return text("logged " + in.Tag), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "sample", Description: "Ask the client for a completion."},
		func(ctx context.Context, req *mcp.CallToolRequest, in TagArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "sample " + in.Tag}}}})
			if err != nil {
				return nil, nil, err
			}
			tc, _ := res.Content.(*mcp.TextContent)
			if tc == nil {
				return nil, nil, fmt.Errorf("sampling returned no text")
			}
			return text("sampled " + tc.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "elicit", Description: "Ask the client for input."},
		func(ctx context.Context, req *mcp.CallToolRequest, in TagArgs) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "elicit " + in.Tag,
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"answer": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, nil, err
			}
			return text(fmt.Sprintf("elicited %s %v", res.Action, res.Content["answer"])), nil, nil
		})
}
