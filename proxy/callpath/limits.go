package callpath

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/ratelimit"
)

// CodeLimited is the JSON-RPC error code of a request other than
// tools/call refused by a limits rule (a tools/call gets a tool error
// result instead); its data carries the rule and retryAfter in seconds.
const CodeLimited = -32029

// limited reports whether the limits rules apply to a forwarded method:
// prompts/get and resources/read (tools/call is checked in routeCall).
func limited(method string) bool {
	return method == "prompts/get" || method == "resources/read"
}

// limitError is the JSON-RPC error of a refusal d.
func limitError(d *ratelimit.Decision) error {
	data, _ := json.Marshal(struct {
		Limit      string `json:"limit"`
		Kind       string `json:"kind"`
		RetryAfter int    `json:"retryAfter"`
	}{d.Rule, d.Kind, d.RetryAfterSeconds()})
	return &jsonrpc.Error{Code: CodeLimited, Message: d.Message, Data: data}
}
