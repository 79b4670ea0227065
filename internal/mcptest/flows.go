package mcptest

import (
	"context"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// FlowResource is the subscribable resource of a NewFlowServer server.
const FlowResource = "res://flow/doc"

// URIArgs are the arguments of the touch tool.
type URIArgs struct {
	URI string `json:"uri"`
}

// NewFlowServer returns a server with NewServer's tools and what a
// client's interactive flows need besides: roots() asks the client for its
// roots and returns their URIs ("roots a b"), the resource FlowResource
// can be subscribed to, and touch(uri) announces uri updated to its
// subscribers before it returns.
func NewFlowServer(name string) *mcp.Server {
	s := newServer(name, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	s.AddResource(&mcp.Resource{URI: FlowResource, Name: "flow-doc", MIMEType: "text/plain"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: FlowResource, Text: "doc"}}}, nil
		})
	s.AddTool(&mcp.Tool{Name: "roots", Description: "The client's roots.", InputSchema: emptySchema()},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, err
			}
			uris := []string{"roots"}
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return text(strings.Join(uris, " ")), nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "touch", Description: "Announce a resource updated."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in URIArgs) (*mcp.CallToolResult, any, error) {
			if err := s.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: in.URI}); err != nil {
				return nil, nil, err
			}
			return text("touched " + in.URI), nil, nil
		})
	return s
}
