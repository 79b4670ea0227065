package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// Issue 32, attack 10: a tool's fixed argument scope ("read") against an
// upstream that decodes its arguments with Go's encoding/json (names
// matched by Unicode case folding, the last match wins): what the upstream
// decoded for each caller's arguments, in both eras, and what arguments
// that repeat a name get.

// goDecoder is an upstream whose grant tool decodes its arguments into a
// Go struct with encoding/json and answers "scope=… q=…".
func goDecoder(_ context.Context, method string, params json.RawMessage) json.RawMessage {
	switch method {
	case "tools/list":
		return json.RawMessage(`{"tools":[{"name":"grant","inputSchema":{"type":"object","properties":{"q":{"type":"string"},"scope":{"type":"string"}}}}]}`)
	case "tools/call":
		var p struct {
			Arguments json.RawMessage `json:"arguments"`
		}
		var in struct {
			Q     string `json:"q"`
			Scope string `json:"scope"`
		}
		_ = json.Unmarshal(params, &p)
		_ = json.Unmarshal(p.Arguments, &in)
		text, _ := json.Marshal(fmt.Sprintf("scope=%s q=%s", in.Scope, in.Q))
		return json.RawMessage(`{"content":[{"type":"text","text":` + string(text) + `}]}`)
	}
	return json.RawMessage(`{}`)
}

func attackFixedArgs(bin, dir string) error {
	up := serve(goDecoder)
	defer up.Close()
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"iam": {"type": "http", "url": %q,
		"tools": {"grant": {"fixed_arguments": {"scope": "read"}}}}}}`, up.URL+"/mcp"))
	if err != nil {
		return err
	}
	defer m.stop()
	before := m.stats()
	sid, err := m.session("2025-11-25")
	if err != nil {
		return err
	}
	for _, args := range []string{`{"q":"x","scope":"admin"}`, `{"q":"x","ſcope":"admin"}`, `{"q":"x","SCOPE":"admin"}`, `{"q":"x","scope":"read","scope":"admin"}`, `{"q":"x","q":"y"}`} {
		_, body, err := m.post(context.Background(), sid, "2025-11-25",
			`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"iam_grant","arguments":`+args+`}}`)
		if err != nil {
			return err
		}
		fmt.Printf("a32-fixedargs 2025-11-25 arguments %s: %s\n", args, sawOrError(body))
		status, out := m.postModern("alice", "tools/call", "iam_grant", `"name":"iam_grant","arguments":`+args, nil)
		fmt.Printf("a32-fixedargs 2026-07-28 arguments %s: HTTP %d, %s\n", args, status, sawOrError(out))
	}
	fmt.Printf("a32-fixedargs alive %v; before: %s; after: %s\n", m.alive(), before, m.stats())
	return nil
}

// sawOrError is what the upstream decoded, from a call's answer (JSON or
// one event), or the JSON-RPC error the caller got.
func sawOrError(body string) string {
	for _, line := range strings.Split(body, "\n") {
		var r struct {
			Result struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"result"`
			Error *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(line), "data: ")), &r) != nil {
			continue
		}
		if r.Error != nil {
			return fmt.Sprintf("error %d: %s", r.Error.Code, short(r.Error.Message))
		}
		if len(r.Result.Content) > 0 {
			return "the upstream saw " + r.Result.Content[0].Text
		}
	}
	return "no answer: " + short(body)
}
