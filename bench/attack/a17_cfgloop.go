package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Issue 17 attacks 9 and 5: a deeply nested admin PUT, and an upstream url
// that is the mux itself.
func attackCfgloop(bin, dir string) error {
	u := &up{}
	hostile := serve(u.script)
	defer hostile.Close()
	upCfg := fmt.Sprintf(`{"type": "http", "url": %q}`, hostile.URL+"/mcp")
	m, err := startMux(bin, dir, `{"mcpServers": {"up": `+upCfg+`}, "admin": {"token": "bench-admin"}}`)
	if err != nil {
		return err
	}
	defer m.stop()

	// Attack 9: a 20 KB value nested 9,990 deep.
	before := m.stats()
	nested := strings.Repeat(`{"a":`, 9_990) + `"` + strings.Repeat("v", 20_000) + `"` + strings.Repeat("}", 9_990)
	body := `{"mcp_servers": {"up": ` + strings.TrimSuffix(upCfg, "}") + `, "extra": ` + nested + `}}}`
	start := time.Now()
	code, detail := m.admin(http.MethodPut, body)
	took := time.Since(start)
	file, _ := os.Stat(filepath.Join(dir, "mux.json"))
	fmt.Printf("nested admin PUT: alive=%v answer=%d %q in %s, file %d bytes; before: %s; after: %s\n",
		m.alive(), code, short(detail), took.Round(time.Millisecond), file.Size(), before, m.stats())

	// Attack 5: a server whose url is the mux itself, spelled "localhost",
	// listed first and unprefixed, so that it wins the name up_echo: a call
	// of up_echo goes to the mux, which sends it to the mux, and so on.
	before = m.stats()
	self := strings.Replace(m.base, "127.0.0.1", "localhost", 1) + "/mcp"
	code, detail = m.admin(http.MethodPut, fmt.Sprintf(`{"mcp_servers": {"self": {"type": "http", "url": %q, "tool_name_prefix": false}, "up": %s}}`, self, upCfg))
	fmt.Printf("self-url admin PUT: answer=%d %q\n", code, short(detail))
	time.Sleep(2 * time.Second) // discovery, or the recursion
	during := m.stats()
	sid, err := m.session("2025-11-25")
	selfCall, other := "", ""
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, selfCall, err = m.post(ctx, sid, "2025-11-25", call(2, "echo"))
		cancel()
		if err != nil {
			selfCall = err.Error()
		}
	}
	if sid2, err := m.session("2025-11-25"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, other, err = m.post(ctx, sid2, "2025-11-25", call(3, "echo"))
		cancel()
		if err != nil {
			other = err.Error()
		}
	} else {
		other = "no session: " + err.Error()
	}
	time.Sleep(2 * time.Second)
	fmt.Printf("self-url call: alive=%v answer %q; another caller's call: %q; before: %s; during: %s; after: %s\n",
		m.alive(), short(selfCall), short(other), before, during, m.stats())
	if !m.alive() {
		return nil
	}

	// The same loop through a second mux, which no url check can see.
	bdir := filepath.Join(dir, "b")
	if err := os.Mkdir(bdir, 0o700); err != nil {
		return err
	}
	b, err := startMux(bin, bdir, fmt.Sprintf(`{"mcpServers": {"a": {"type": "http", "url": %q}}}`, m.base+"/mcp"))
	if err != nil {
		return err
	}
	defer b.stop()
	code, detail = m.admin(http.MethodPut, fmt.Sprintf(`{"mcp_servers": {"up": %s, "b": {"type": "http", "url": %q}}}`, upCfg, b.base+"/mcp"))
	time.Sleep(2 * time.Second)
	before = m.stats()
	loopCall := ""
	if sid, err := m.session("2025-11-25"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		_, loopCall, err = m.post(ctx, sid, "2025-11-25", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"b_a_up_echo","arguments":{}}}`)
		cancel()
		if err != nil {
			loopCall = err.Error()
		}
	}
	fmt.Printf("loop through a second mux (PUT %d): alive=%v call b_a_up_echo answered %q; before: %s; after: %s\n",
		code, m.alive(), short(loopCall), before, m.stats())
	return nil
}

// admin sends an admin API config request and returns the status and body.
func (m *mux) admin(method, body string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, m.base+"/api/mcp/config", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer bench-admin")
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b)
}
