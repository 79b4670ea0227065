package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// attackShares: one user (alice) floods sessions and subscriptions/listen
// streams; another user (bob) then tries one of each. Before issue 17 the
// flood took the whole inbound.max_sessions and bob was refused; with
// per-caller shares alice stops at hers. It also prints what a listen
// stream costs the mux (RSS per stream) and what is left after they close.
// Then, on a mux of its own, alice floods parked input_required calls
// (attackParked).
func attackShares(bin, dir string) error {
	if err := attackSessionShares(bin, dir); err != nil {
		return err
	}
	pdir := filepath.Join(dir, "parked")
	if err := os.MkdirAll(pdir, 0o700); err != nil {
		return err
	}
	return attackParked(bin, pdir)
}

func attackSessionShares(bin, dir string) error {
	const limit = 2000
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {}, "inbound": {"auth": {"mode": "trusted_header"},
		"user_header": "X-User", "max_sessions": %d}}`, limit))
	if err != nil {
		return err
	}
	defer m.stop()
	initialize := func(user string) int {
		req, _ := http.NewRequest(http.MethodPost, m.base+"/mcp", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attack","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("X-User", user)
		resp, err := m.client.Do(req)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	before := m.stats()
	opened := 0
	for range limit {
		if initialize("alice") == http.StatusOK {
			opened++
		}
	}
	fmt.Printf("sessions: alice opened %d of %d tries; bob's initialize: HTTP %d; alive %v; before: %s; during: %s\n",
		opened, limit, initialize("bob"), m.alive(), before, m.stats())

	rss0 := m.rssKiB()
	before = m.stats()
	var conns []net.Conn
	for range limit {
		c, ok := rawListen(m.base, "alice")
		if c != nil && !ok {
			c.Close()
		}
		if !ok {
			break
		}
		conns = append(conns, c)
	}
	rss1 := m.rssKiB()
	during := m.stats()
	bc, bobOK := rawListen(m.base, "bob")
	if bc != nil {
		bc.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	time.Sleep(2 * time.Second)
	per := 0.0
	if len(conns) > 0 {
		per = float64(rss1-rss0) / float64(len(conns))
	}
	fmt.Printf("listens: alice opened %d; bob's listen acknowledged: %v; %.1f KiB RSS per listen; alive %v; before: %s; during: %s; after close: %s\n",
		len(conns), bobOK, per, m.alive(), before, during, m.stats())
	return nil
}

// rawListen opens a 2026-07-28 subscriptions/listen for user on a bare
// connection and reports whether the mux acknowledged it.
func rawListen(base, user string) (net.Conn, bool) {
	host := strings.TrimPrefix(base, "http://")
	c, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return nil, false
	}
	body := `{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"attack","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},` +
		`"notifications":{"toolsListChanged":true}}}`
	fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"+
		"Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nX-User: %s\r\nContent-Length: %d\r\n\r\n%s", host, user, len(body), body)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReaderSize(c, 512)
	for {
		line, err := r.ReadString('\n')
		if err != nil || strings.Contains(line, `"error"`) {
			return c, false
		}
		if strings.Contains(line, "notifications/subscriptions/acknowledged") {
			_ = c.SetReadDeadline(time.Time{})
			return c, true
		}
	}
}

// rssKiB is the mux's resident set in KiB (0 when unknown).
func (m *mux) rssKiB() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	return 0
}
