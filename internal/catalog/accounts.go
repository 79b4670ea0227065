package catalog

import "encoding/json"

// ConnectAccountName is the built-in tool that connects (or disconnects)
// the caller's own account on a server where each caller connects theirs.
const ConnectAccountName = "connect_account"

// connectTool is connect_account's tool object for servers (nil for none):
// its server argument is one of them.
func connectTool(servers []string) json.RawMessage {
	if len(servers) == 0 {
		return nil
	}
	tool := map[string]any{
		"name": ConnectAccountName,
		"description": "Connect your own account on an MCP server that acts as each user (you are asked to open a link and approve), " +
			"or forget it with disconnect. Use it before calling such a server's tools, or when a call says your account is not connected.",
		"inputSchema": map[string]any{
			"type": "object",
			"properties": map[string]any{
				"server":     map[string]any{"type": "string", "enum": servers, "description": "The server to connect your account on."},
				"disconnect": map[string]any{"type": "boolean", "description": "Forget your account on the server instead."},
			},
			"required":             []string{"server"},
			"additionalProperties": false,
		},
		"annotations": map[string]any{"title": "Connect your account", "openWorldHint": true, "idempotentHint": true},
	}
	b, _ := json.Marshal(tool) // strings, bools and maps: cannot fail
	return b
}

// accountServers are the names of the sources where each caller connects
// their own account.
func accountServers[S any](sources []Source[S]) []string {
	var out []string
	for _, src := range sources {
		if src.Accounts {
			out = append(out, src.Name)
		}
	}
	return out
}
