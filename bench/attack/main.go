// Command attack runs the hostile-input scenarios of issue 8 against an
// mcp-mux binary and prints, for each, the mux process's goroutines, open
// file descriptors and resident memory before and after, and whether it is
// still alive. Run it against two builds to compare them:
//
//	go build -o /tmp/mux-new ./cmd/mcp-mux
//	go run ./bench/attack -mux /tmp/mux-new
//
// Every upstream is an in-process HTTP server on loopback; nothing leaves
// the machine.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	muxBin := flag.String("mux", "", "mcp-mux binary to attack")
	idle := flag.Duration("idle-wait", 0, "also hold 200 idle keep-alive connections this long (the mux closes them after 2m)")
	only := flag.String("only", "", "run only the scenarios whose name contains this (\"issue8\" for the first set)")
	flag.Parse()
	if *muxBin == "" {
		fmt.Fprintln(os.Stderr, "usage: attack -mux BINARY [-idle-wait 130s] [-only NAME]")
		os.Exit(2)
	}
	if err := runAll(*muxBin, *idle, *only); err != nil {
		fmt.Fprintln(os.Stderr, "attack:", err)
		os.Exit(1)
	}
}

// up is the hostile upstream: tools hang (until the client goes away), deep
// (a result nested two million levels) and echo.
type up struct {
	inflight atomic.Int64
}

func (u *up) script(ctx context.Context, method string, params json.RawMessage) json.RawMessage {
	switch method {
	case "tools/list":
		return json.RawMessage(`{"tools":[{"name":"hang","inputSchema":{"type":"object"}},{"name":"deep","inputSchema":{"type":"object"}},{"name":"echo","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		switch {
		case strings.Contains(string(params), `"hang"`):
			u.inflight.Add(1)
			defer u.inflight.Add(-1)
			<-ctx.Done()
			return nil
		case strings.Contains(string(params), `"deep"`):
			return deep(2_000_000)
		}
		return json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
	}
	return json.RawMessage(`{}`)
}

func deep(n int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", n) + strings.Repeat("]", n))
}

// serve answers JSON-RPC POSTs with script (initialize included).
func serve(script func(context.Context, string, json.RawMessage) json.RawMessage) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.NewDecoder(r.Body).Decode(&m) != nil || m.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		res := json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"hostile","version":"1"}}`)
		if m.Method == "initialize" {
			w.Header().Set("Mcp-Session-Id", "s")
		} else if res = script(r.Context(), m.Method, m.Params); res == nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, res)
	}))
}

// mux is a running mcp-mux process.
type mux struct {
	cmd    *exec.Cmd
	base   string
	done   chan struct{}
	code   int
	client *http.Client

	mu      sync.Mutex
	skipped string // the last "skipping upstream server" reason
}

func startMux(bin, dir, cfg string) (*mux, error) { return startMuxOut(bin, dir, cfg, nil) }

// startMuxOut is startMux with the process's stdout going to stdout (nil:
// /dev/null).
func startMuxOut(bin, dir, cfg string, stdout io.Writer) (*mux, error) {
	path := filepath.Join(dir, "mux.json")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--config", path, "--listen", "127.0.0.1:0")
	cmd.Stdout = stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &mux{cmd: cmd, done: make(chan struct{}), client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512}}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l map[string]any
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch l["@message"] {
			case "serving":
				addr <- fmt.Sprint(l["addr"])
			case "skipping upstream server":
				m.mu.Lock()
				m.skipped = fmt.Sprint(l["reason"])
				m.mu.Unlock()
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			m.code = ee.ExitCode()
		}
		close(m.done)
	}()
	select {
	case a := <-addr:
		m.base = "http://" + a
	case <-m.done:
		return m, errors.New("mux exited at startup")
	case <-time.After(20 * time.Second):
		return nil, errors.New("mux did not start")
	}
	time.Sleep(500 * time.Millisecond) // background discovery
	return m, nil
}

func (m *mux) alive() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// stats returns goroutines (from /metrics), open fds and RSS in MiB.
func (m *mux) stats() string {
	if !m.alive() {
		return "dead"
	}
	pid := m.cmd.Process.Pid
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	var rss int
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				rss, _ = strconv.Atoi(strings.Fields(v)[0])
			}
		}
	}
	g, heap := "?", 0.0
	if resp, err := m.client.Get(m.base + "/metrics"); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "go_goroutines "); ok {
				g = v
			}
			if v, ok := strings.CutPrefix(l, "go_memstats_heap_inuse_bytes "); ok {
				heap, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	return fmt.Sprintf("goroutines %s, fds %d, RSS %d MiB, heap in use %.0f MiB", g, len(fds), rss/1024, heap/(1<<20))
}

func (m *mux) post(ctx context.Context, sid, version, body string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", version)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" && sid == "" {
		return resp.StatusCode, s, nil
	}
	return resp.StatusCode, string(b), nil
}

func (m *mux) session(version string) (string, error) {
	_, sid, err := m.post(context.Background(), "", version,
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"attack","version":"1"}}}`)
	if err != nil {
		return "", err
	}
	_, _, err = m.post(context.Background(), sid, version, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return sid, err
}

func (m *mux) stop() (time.Duration, int) {
	start := time.Now()
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
		return time.Since(start), m.code
	case <-time.After(40 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
		return time.Since(start), -1
	}
}

func call(id int, tool string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up_%s","arguments":{}}}`, id, tool)
}

func short(s string) string {
	if len(s) > 160 {
		return s[:160] + "…"
	}
	return strings.TrimSpace(s)
}

func run(bin string, idleWait time.Duration) error {
	dir, err := os.MkdirTemp("", "attack-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	u := &up{}
	hostile := serve(u.script)
	defer hostile.Close()

	// Discovery of a deep tools/list: at startup.
	deepList := serve(func(context.Context, string, json.RawMessage) json.RawMessage {
		return json.RawMessage(`{"tools":` + string(deep(2_000_000)) + `}`)
	})
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"deeplist": {"type": "http", "url": %q}}}`, deepList.URL+"/mcp"))
	if m != nil {
		select { // the 4 MB reply arrives and is decoded
		case <-m.done:
		case <-time.After(10 * time.Second):
		}
	}
	reason := ""
	if m != nil {
		m.mu.Lock()
		reason = m.skipped
		m.mu.Unlock()
	}
	fmt.Printf("deep tools/list at discovery: alive=%v err=%v skipped=%q\n", m != nil && m.alive(), err, reason)
	if m != nil && m.alive() {
		m.stop()
	}
	deepList.Close()

	// Paging tools/list: 256 KiB pages without end.
	var pages atomic.Int64
	pager := serve(func(_ context.Context, method string, _ json.RawMessage) json.RawMessage {
		if method != "tools/list" {
			return json.RawMessage(`{}`)
		}
		n := pages.Add(1)
		desc := strings.Repeat("x", 256<<10)
		return json.RawMessage(fmt.Sprintf(`{"tools":[{"name":"t%d","description":%q,"inputSchema":{"type":"object"}}],"nextCursor":"%d"}`, n, desc, n))
	})
	if m, err = startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"pager": {"type": "http", "url": %q}}}`, pager.URL+"/mcp")); err != nil {
		return err
	}
	time.Sleep(5 * time.Second)
	fmt.Printf("paging tools/list (256 KiB pages): %d pages fetched in 5s; %s\n", pages.Load(), m.stats())
	m.stop()
	pager.Close()

	if m, err = startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, hostile.URL+"/mcp")); err != nil {
		return err
	}
	defer func() {
		if m.alive() {
			_ = m.cmd.Process.Kill()
		}
	}()
	fmt.Printf("started: %s\n", m.stats())

	sid, err := m.session("2025-03-26")
	if err != nil {
		return err
	}

	// Abandoned batches: 300 hanging calls, as one batch and as ten of 30.
	before := m.stats()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	calls := make([]string, 300)
	for i := range calls {
		calls[i] = call(100+i, "hang")
	}
	var sids []string
	for range 10 {
		s, err := m.session("2025-03-26")
		if err != nil {
			cancel()
			return err
		}
		sids = append(sids, s)
	}
	wg.Go(func() { _, _, _ = m.post(ctx, sid, "2025-03-26", "["+strings.Join(calls, ",")+"]") })
	for b, s := range sids {
		wg.Go(func() { _, _, _ = m.post(ctx, s, "2025-03-26", "["+strings.Join(calls[b*30:b*30+30], ",")+"]") })
	}
	time.Sleep(3 * time.Second)
	during := m.stats()
	n := u.inflight.Load()
	cancel()
	wg.Wait()
	m.client.CloseIdleConnections()
	time.Sleep(3 * time.Second)
	fmt.Printf("abandoned batches (one of 300 calls, ten of 30): %d calls reached the upstream; before %s | in flight %s | 3s after the clients left %s, %d still upstream\n",
		n, before, during, m.stats(), u.inflight.Load())

	// DELETE of a session with hung calls.
	s, err := m.session("2025-03-26")
	if err != nil {
		return err
	}
	hctx, hcancel := context.WithCancel(context.Background())
	for i := range 3 {
		wg.Go(func() { _, _, _ = m.post(hctx, s, "2025-03-26", call(10+i, "hang")) })
	}
	wg.Go(func() { _, _, _ = m.post(hctx, s, "2025-03-26", "["+call(20, "hang")+","+call(21, "hang")+"]") })
	time.Sleep(time.Second)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(dctx, http.MethodDelete, m.base+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", s)
	start := time.Now()
	dresp, err := m.client.Do(req)
	status := "error: " + fmt.Sprint(err)
	if err == nil {
		status = dresp.Status
		dresp.Body.Close()
	}
	dcancel()
	fmt.Printf("DELETE with 5 hung calls: %s after %s\n", status, time.Since(start).Round(time.Millisecond))
	hcancel()
	wg.Wait()

	// 32 concurrent 4 MB bodies.
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"up_echo","arguments":{"x":"` + strings.Repeat("a", 4<<20-200) + `"}}}`
	for range 32 {
		wg.Go(func() { _, _, _ = m.post(context.Background(), sid, "2025-03-26", big) })
	}
	wg.Wait()
	fmt.Printf("32 concurrent 4 MB bodies: %s\n", m.stats())
	// Traffic afterwards, enough to run several garbage collections: pooled
	// buffers stay in circulation (and live), the rest is freed.
	mid := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"up_echo","arguments":{"x":"` + strings.Repeat("b", 100<<10) + `"}}}`
	for w := range 8 {
		wg.Go(func() {
			for i := range 500 {
				_, _, _ = m.post(context.Background(), sid, "2025-03-26", fmt.Sprintf(mid, 100000*(w+1)+i))
			}
		})
	}
	wg.Wait()
	time.Sleep(5 * time.Second)
	fmt.Printf("  after 4000 calls of 100 KB and 5s: %s\n", m.stats())

	// Idle keep-alive connections.
	if idleWait > 0 {
		var conns []net.Conn
		for range 200 {
			c, err := net.Dial("tcp", strings.TrimPrefix(m.base, "http://"))
			if err != nil {
				return err
			}
			fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
			conns = append(conns, c)
		}
		time.Sleep(time.Second)
		fmt.Printf("200 idle keep-alive connections: %s\n", m.stats())
		time.Sleep(idleWait)
		fmt.Printf("  after %s: %s\n", idleWait, m.stats())
		for _, c := range conns {
			_ = c.Close()
		}
	}

	// SIGTERM with hung calls.
	for i := range 3 {
		wg.Go(func() { _, _, _ = m.post(context.Background(), sid, "2025-03-26", call(30+i, "hang")) })
	}
	time.Sleep(time.Second)
	took, code := m.stop()
	fmt.Printf("SIGTERM with 3 hung calls: exit %d after %s\n", code, took.Round(time.Millisecond))
	wg.Wait()

	if m, err = startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, hostile.URL+"/mcp")); err != nil {
		return err
	}
	if sid, err = m.session("2025-03-26"); err != nil {
		return err
	}
	// Deep request on an open session.
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up_echo","arguments":{"x":` + string(deep(2_000_000)) + `}}}`
	code, resp, err := m.post(context.Background(), sid, "2025-03-26", body)
	time.Sleep(500 * time.Millisecond)
	fmt.Printf("4 MB request nested 2,000,000 deep: HTTP %d %q err=%v; alive=%v\n", code, short(resp), err, m.alive())
	if !m.alive() {
		if m, err = startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}}}`, hostile.URL+"/mcp")); err != nil {
			return err
		}
		if sid, err = m.session("2025-03-26"); err != nil {
			return err
		}
	}
	// Deep reply.
	code, resp, err = m.post(context.Background(), sid, "2025-03-26", call(8, "deep"))
	time.Sleep(500 * time.Millisecond)
	fmt.Printf("upstream reply nested 2,000,000 deep: HTTP %d %q err=%v; alive=%v\n", code, short(resp), err, m.alive())
	if m.alive() {
		m.stop()
	}

	return nil
}
