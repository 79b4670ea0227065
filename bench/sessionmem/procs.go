package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/procstat"
)

// upstreamServer is the in-process HTTP MCP server with one tool, echo.
type upstreamServer struct {
	s      *mcp.Server
	hs     *http.Server
	addr   string
	calls  atomic.Int64 // echo calls answered
	inited atomic.Int64 // sessions initialized
}

type echoArgs struct {
	Text string `json:"text"`
}

func startUpstream() (*upstreamServer, error) {
	u := &upstreamServer{}
	u.s = mcp.NewServer(&mcp.Implementation{Name: "sessionmem-upstream", Version: "1"}, &mcp.ServerOptions{
		InitializedHandler: func(context.Context, *mcp.InitializedRequest) { u.inited.Add(1) },
	})
	mcp.AddTool(u.s, &mcp.Tool{Name: "echo", Description: "Echo text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
			u.calls.Add(1)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	u.addr = ln.Addr().String()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return u.s }, nil))
	u.hs = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = u.hs.Serve(ln) }()
	return u, nil
}

func (u *upstreamServer) url() string { return "http://" + u.addr + "/mcp" }

// sessions counts the sessions open at the upstream.
func (u *upstreamServer) sessions() int {
	n := 0
	for range u.s.Sessions() {
		n++
	}
	return n
}

func (u *upstreamServer) close() {
	_ = u.hs.Close()
	for ss := range u.s.Sessions() {
		_ = ss.Close()
	}
}

// redisServer is a private redis-server on a free loopback port.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	c    *redis.Client
}

func startRedis(ctx context.Context, dir string) (*redisServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the benchmark
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	rd := &redisServer{addr: addr, cmd: cmd, c: redis.NewClient(&redis.Options{Addr: addr})}
	for i := 0; ; i++ {
		if rd.c.Ping(ctx).Err() == nil {
			return rd, nil
		}
		if i > 250 {
			rd.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// usedMemory is INFO memory's used_memory.
func (rd *redisServer) usedMemory(ctx context.Context) int64 {
	s, err := rd.c.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

func (rd *redisServer) stop() {
	_ = rd.c.Close()
	_ = rd.cmd.Process.Kill()
	_ = rd.cmd.Wait()
}

// muxProcess is a running `mcp-mux serve`.
type muxProcess struct {
	cmd     *exec.Cmd
	base    string
	done    chan struct{}
	metrics *http.Client

	mu   sync.Mutex
	tail []string // the last log lines, for errors
}

func startMux(ctx context.Context, bin, cfgPath, dataDir string) (*muxProcess, error) {
	cmd := exec.Command(bin, "serve", "--config", cfgPath, "--listen", "127.0.0.1:0", "--log-format", "json", "--data-dir", dataDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	m := &muxProcess{cmd: cmd, done: make(chan struct{}), metrics: &http.Client{Timeout: 10 * time.Second}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			m.note(sc.Text())
			var l struct {
				Message string `json:"@message"`
				Addr    string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Message == "serving" {
				select {
				case addr <- l.Addr:
				default:
				}
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	go func() { _ = cmd.Wait(); close(m.done) }()
	select {
	case a := <-addr:
		m.base = "http://" + a
		return m, nil
	case <-m.done:
		return nil, fmt.Errorf("mcp-mux exited at startup:\n%s", m.lastLines())
	case <-time.After(30 * time.Second):
		m.stop()
		return nil, fmt.Errorf("mcp-mux did not log \"serving\" within 30s:\n%s", m.lastLines())
	case <-ctx.Done():
		m.stop()
		return nil, ctx.Err()
	}
}

func (m *muxProcess) note(line string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tail = append(m.tail, line); len(m.tail) > 20 {
		m.tail = m.tail[1:]
	}
}

func (m *muxProcess) lastLines() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Join(m.tail, "\n")
}

func (m *muxProcess) alive() bool {
	select {
	case <-m.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits, killing the mux after 20 s.
func (m *muxProcess) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(20 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// waitReady waits for /readyz to answer 200.
func (m *muxProcess) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/readyz", nil)
		resp, err := m.metrics.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !m.alive() {
			return fmt.Errorf("mcp-mux exited:\n%s", m.lastLines())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("/readyz did not answer 200 within %s", limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sample measures the mux: RSS and fds from /proc, heap and goroutines from
// /metrics, and Redis's used_memory when rd is set.
func (m *muxProcess) sample(ctx context.Context, rd *redisServer) Sample {
	pid := m.cmd.Process.Pid
	s := Sample{HeapInuse: -1, StackInuse: -1, Goroutines: -1}
	s.RSS, _ = procstat.RSS(pid)
	if fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd"); err == nil {
		s.FDs = len(fds)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/metrics", nil)
	if resp, err := m.metrics.Do(req); err == nil {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			name, v, ok := strings.Cut(sc.Text(), " ")
			if !ok {
				continue
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				continue
			}
			switch name {
			case "go_memstats_heap_inuse_bytes":
				s.HeapInuse = int64(f)
			case "go_memstats_stack_inuse_bytes":
				s.StackInuse = int64(f)
			case "go_goroutines":
				s.Goroutines = int(f)
			}
		}
		resp.Body.Close()
	}
	if rd != nil {
		s.RedisUsed = rd.usedMemory(ctx)
	}
	return s
}

// settle samples every interval until two RSS samples in a row are within
// 1% of each other (at most limit), and returns the last.
func (m *muxProcess) settle(ctx context.Context, rd *redisServer, interval, limit time.Duration) Sample {
	prev := m.sample(ctx, rd)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(interval) // settling has no event to wait on
		cur := m.sample(ctx, rd)
		if within1pct(prev.RSS, cur.RSS) {
			cur.Settled = true
			return cur
		}
		prev = cur
	}
	return prev
}
