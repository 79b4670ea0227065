package proxy_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// A modern client of a legacy stdio upstream: each request the upstream
// sends the client (roots, sampling, form and URL elicitation) reaches the
// client's input_required with the params the upstream wrote, fields the
// SDK does not know and URL elicitation's elicitationId included, and the
// client's answer reaches the upstream as the client wrote it.
func TestModernBridgeKeepsInputBytes(t *testing.T) {
	cmd, args, env := mcptest.ScriptedStdio(mcptest.AskClient)
	c, _ := json.Marshal(cmd)
	a, _ := json.Marshal(args)
	e, _ := json.Marshal(env)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"local": {"type": "stdio", "command": %s, "args": %s, "env": %s}}}`, c, a, e), proxy.Options{})
	url := m.ts.URL + "/mcp"
	const caps = `{"roots":{"listChanged":true},"sampling":{},"elicitation":{"form":{},"url":{}}}`
	for _, tc := range []struct{ name, method, params, answer string }{
		{"roots", "roots/list", `{"_meta":{"trace":"r-1"}}`,
			`{"roots":[{"uri":"file:///tmp/a","name":"a","x-extra":1}],"_meta":{"m":"kept"}}`},
		{"sampling", "sampling/createMessage",
			`{"maxTokens":5,"messages":[{"role":"user","content":{"type":"text","text":"hi","x-part":true}}],"x-vendor":{"b":2,"a":1}}`,
			`{"role":"assistant","model":"m-1","content":{"type":"text","text":"hello","x-part":"kept"},"x-extra":[1,2]}`},
		{"form elicitation", "elicitation/create",
			`{"message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string","x-ui":"wide"}}},"x-extra":"kept"}`,
			`{"action":"accept","content":{"name":"Ada"},"x-extra":"kept"}`},
		{"url elicitation", "elicitation/create",
			`{"mode":"url","message":"open it","url":"https://example.com/consent","elicitationId":"e-42"}`,
			`{"action":"accept","_meta":{"m":1}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			call := fmt.Sprintf(`"name":"local_ask","arguments":{"method":%q,"params":%s}`, tc.method, mustQuote(tc.params))
			_, r := modernCall(t, url, nil, caps, "tools/call", "local_ask", call)
			reqs, state := inputRequiredOf(t, r)
			if len(reqs) != 1 {
				t.Fatalf("input requests %v", reqs)
			}
			var key string
			for k, ir := range reqs {
				key = k
				if ir.Method != tc.method || string(ir.Params) != tc.params {
					t.Errorf("input request %s %s\nwant         %s %s", ir.Method, ir.Params, tc.method, tc.params)
				}
			}
			_, r = modernCall(t, url, nil, caps, "tools/call", "local_ask",
				call+`,"inputResponses":{`+mustQuote(key)+`:`+tc.answer+`},"requestState":`+mustQuote(state))
			var res struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if r.Error != nil || json.Unmarshal(r.Result, &res) != nil || len(res.Content) != 1 {
				t.Fatalf("retry: %s %+v", r.Result, r.Error)
			}
			if got := res.Content[0].Text; got != tc.answer {
				t.Errorf("the upstream got %s\nwant            %s", got, tc.answer)
			}
		})
	}
}
