package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

// attackPanic is issue 17's attack 1: with durable tasks on (the embedded
// store in dir), a 2026-07-28 tools/call of each built-in task tool. The
// base mux panicked on the first and exited; another caller's call after
// the three shows whether it still serves.
func attackPanic(bin, dir string) error {
	u := &up{}
	upstream := serve(u.script)
	defer upstream.Close()
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}, "mcp_tasks": {"enabled": true}}`, upstream.URL+"/mcp")
	// serve reads the embedded store's directory from MCP_MUX_DATA_DIR
	// when --data-dir is absent; the child inherits it.
	old, had := os.LookupEnv("MCP_MUX_DATA_DIR")
	_ = os.Setenv("MCP_MUX_DATA_DIR", dir)
	m, err := startMux(bin, dir, cfg)
	if had {
		_ = os.Setenv("MCP_MUX_DATA_DIR", old)
	} else {
		_ = os.Unsetenv("MCP_MUX_DATA_DIR")
	}
	if err != nil {
		return err
	}
	defer m.stop()
	aliveBefore, before := m.alive(), m.stats()
	var answers []string
	for i, c := range []struct{ tool, args string }{
		{"list_background_tasks", `{}`},
		{"get_background_task", `{"task_id":"mcp-task-00000000000000000000000000000000"}`},
		{"cancel_background_task", `{}`},
	} {
		code, body, err := m.postModernTool(c.tool, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}},"name":%q,"arguments":%s}}`, i+1, c.tool, c.args))
		answers = append(answers, fmt.Sprintf("%s: HTTP %d %s err=%v", c.tool, code, short(oneLine(body)), err))
	}
	time.Sleep(200 * time.Millisecond) // an exit takes a moment to be seen
	other := "dead"
	if m.alive() {
		sid, err := m.session("2025-11-25")
		if err != nil {
			other = "error: " + err.Error()
		} else {
			code, body, err := m.post(context.Background(), sid, "2025-11-25", call(9, "echo"))
			other = fmt.Sprintf("HTTP %d %s err=%v", code, short(oneLine(body)), err)
		}
	}
	fmt.Printf("built-in task tools over 2026-07-28 (mcp_tasks on): alive before=%v after=%v (exit code %d); before %s | after %s\n", aliveBefore, m.alive(), m.code, before, m.stats())
	for _, a := range answers {
		fmt.Printf("  %s\n", a)
	}
	fmt.Printf("  another caller's tools/call afterwards: %s\n", other)
	return nil
}

// postModernTool sends one 2026-07-28 tools/call of tool.
func (m *mux) postModernTool(tool, body string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// oneLine is s with its line breaks as spaces.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
