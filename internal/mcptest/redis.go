package mcptest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Redis is a redis-server a test started on a free loopback port, so it can
// stop and restart it without touching anyone else's Redis.
type Redis struct {
	t    testing.TB
	Addr string
	dir  string
	aof  bool
	args []string // more redis-server arguments (cluster, replication)
	// sentinelConf, when set, makes this a sentinel with that config file.
	sentinelConf string

	mu  sync.Mutex
	cmd *exec.Cmd
}

// StartRedis starts redis-server (which must be on PATH) in a temporary
// directory, with the append-only file on when aof is set, and stops it
// when the test ends.
func StartRedis(t testing.TB, aof bool) *Redis {
	t.Helper()
	return startRedis(t, aof)
}

// startRedis starts redis-server with more arguments.
func startRedis(t testing.TB, aof bool, args ...string) *Redis {
	t.Helper()
	r := &Redis{t: t, Addr: FreeAddr(t), dir: t.TempDir(), aof: aof, args: args}
	r.Start()
	t.Cleanup(r.Stop)
	return r
}

// FreeAddr returns a loopback address with a port free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// URL is the redis:// URL of the server.
func (r *Redis) URL() string { return "redis://" + r.Addr }

// Start (re)starts the server and waits until it answers PING.
func (r *Redis) Start() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		return
	}
	_, port, _ := net.SplitHostPort(r.Addr)
	aof := "no"
	if r.aof {
		aof = "yes"
	}
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", aof, "--appendfsync", "always", "--protected-mode", "no"}, r.args...)
	if r.sentinelConf != "" {
		args = []string{r.sentinelConf, "--sentinel"}
	}
	cmd := exec.Command("redis-server", args...)
	// A test binary killed by its timeout takes the server with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("starting redis-server: %v", err)
	}
	r.cmd = cmd
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := ping(r.Addr); err == nil {
			return
		} else if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s did not answer: %v", r.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL: what survives is what the AOF holds).
func (r *Redis) Stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}

// Pause stops the server's process (SIGSTOP): it keeps its connections
// and answers nothing, as a Redis that hangs does. Resume continues it.
func (r *Redis) Pause() { r.signal(syscall.SIGSTOP) }

// Resume continues a paused server (SIGCONT).
func (r *Redis) Resume() { r.signal(syscall.SIGCONT) }

func (r *Redis) signal(sig syscall.Signal) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		_ = r.cmd.Process.Signal(sig)
	}
}

// Do sends one inline command and returns its first reply line (tests use
// it for INFO-free checks such as DBSIZE).
func (r *Redis) Do(args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return "", fmt.Errorf("redis: %s", line[1:])
	}
	if strings.HasPrefix(line, ":") || strings.HasPrefix(line, "+") {
		return line[1:], nil
	}
	return line, nil
}

func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %s", strconv.Quote(line))
	}
	return nil
}
