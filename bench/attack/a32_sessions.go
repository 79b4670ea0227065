package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// Issue 32's attacks on 2025-11-25 sessions shared by two replicas on one
// private redis-server, one scenario each:
//
//   - a32-threads (attack 3): 300 calls of an unknown tool, each as a new
//     60 KB X-Mux-Thread-Id, two at a time, on replica A; prints the bytes written to
//     Redis, the session's Redis footprint (its event log aside) and its
//     largest key, the largest change notice on the bus, and another
//     caller's p50 on replica B (a session opened, called and DELETEd)
//     before and during.
//   - a32-zombies (attack 5): a session's first request on B racing its
//     DELETE on A (300 times), and a DELETE while B's pub/sub link
//     reconnects (20 times); prints how many sessions B still serves after
//     each DELETE answered 204.
//   - a32-caps (attack 6): with a share of 5 and a 2 s idle timeout, one
//     caller keeps its sessions in use and opens more every second for
//     12 s; prints the sessions it holds against its share.

// withRedis runs an attack with a private redis-server.
func withRedis(attack func(bin, dir string, rd *attackRedis) error) func(bin, dir string) error {
	return func(bin, dir string) error {
		rd, err := startAttackRedis(dir)
		if err != nil {
			return err
		}
		defer rd.stop()
		return attack(bin, dir, rd)
	}
}

// attackRedis is a private redis-server on a free loopback port.
type attackRedis struct {
	url string
	cmd *exec.Cmd
	c   *redis.Client
}

func startAttackRedis(dir string) (*attackRedis, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	rd := &attackRedis{url: "redis://" + addr, cmd: cmd, c: redis.NewClient(&redis.Options{Addr: addr})}
	for i := 0; rd.c.Ping(context.Background()).Err() != nil; i++ {
		if i > 250 {
			rd.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return rd, nil
}

func (rd *attackRedis) stop() {
	_ = rd.c.Close()
	_ = rd.cmd.Process.Kill()
	_ = rd.cmd.Wait()
}

// stat returns a number of INFO's section.
func (rd *attackRedis) stat(section, name string) int64 {
	s, _ := rd.c.Info(context.Background(), section).Result()
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// sessionKeys returns the Redis memory of session sid's keys (its event
// log aside) and of the largest of them.
func (rd *attackRedis) sessionKeys(sid string) (total, largest int64) {
	ctx := context.Background()
	keys, _ := rd.c.Keys(ctx, sessionstore.SessionKey("mcp-mux:", sid)+"*").Result()
	for _, k := range keys {
		if strings.HasSuffix(k, ":log") {
			continue
		}
		n, _ := rd.c.MemoryUsage(ctx, k).Result()
		total += n
		largest = max(largest, n)
	}
	return total, largest
}

// replicas starts two muxes on cfg (its store block added) sharing rd.
func replicas(bin, dir string, rd *attackRedis, cfg string) ([2]*mux, error) {
	var ms [2]*mux
	cfg = strings.TrimSuffix(strings.TrimSpace(cfg), "}") + fmt.Sprintf(`, "store": {"redis_url": %q}}`, rd.url)
	for i := range ms {
		m, err := startMux(bin, dir, cfg)
		if err != nil {
			for _, m := range ms[:i] {
				m.stop()
			}
			return ms, err
		}
		ms[i] = m
	}
	return ms, nil
}

// rpc posts body to m as user (on session sid, with extra headers) and
// returns the status and the session id it opened or the body.
func (m *mux) rpc(user, sid, body string, extra map[string]string) (int, string) {
	req, _ := http.NewRequest(http.MethodPost, m.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-User", user)
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" && sid == "" {
		return resp.StatusCode, s
	}
	return resp.StatusCode, string(b)
}

// open initializes a session of user on m ("" when refused).
func (m *mux) open(user string) string {
	code, sid := m.rpc(user, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attack","version":"1"}}}`, nil)
	if code != http.StatusOK {
		return ""
	}
	m.rpc(user, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil)
	return sid
}

// del DELETEs session sid on m and returns the status.
func (m *mux) del(user, sid string) int {
	req, _ := http.NewRequest(http.MethodDelete, m.base+"/mcp", nil)
	req.Header.Set("X-User", user)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := m.client.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

const pingBody = `{"jsonrpc":"2.0","id":7,"method":"ping"}`

// p50 is the median of ds.
func p50(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[len(ds)/2]
}

func attackThreads(bin, dir string, rd *attackRedis) error {
	upstream := serve((&up{}).script)
	defer upstream.Close()
	ms, err := replicas(bin, dir, rd, fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q}},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`, upstream.URL))
	if err != nil {
		return err
	}
	defer ms[0].stop()
	defer ms[1].stop()
	a, b := ms[0], ms[1]
	// The victim's unit of work goes through Redis: a new session, a
	// call, and its DELETE.
	victimOnce := func(i int) (time.Duration, bool) {
		start := time.Now()
		sid := b.open("victim")
		code, _ := b.rpc("victim", sid, call(i, "echo"), nil)
		ok := sid != "" && code == http.StatusOK && b.del("victim", sid) == http.StatusNoContent
		return time.Since(start), ok
	}
	var baseline []time.Duration
	for i := range 50 {
		if d, ok := victimOnce(i); ok {
			baseline = append(baseline, d)
		}
	}
	before := p50(baseline)
	ps := rd.c.Subscribe(context.Background(), "mcp-mux:s:bus")
	defer ps.Close()
	var notices, largestNotice atomic.Int64
	go func() {
		for msg := range ps.Channel() {
			notices.Add(1)
			if n := int64(len(msg.Payload)); n > largestNotice.Load() {
				largestNotice.Store(n)
			}
		}
	}()
	sid := a.open("mallory")
	in0 := rd.stat("stats", "total_net_input_bytes")
	start := time.Now()
	var wg sync.WaitGroup
	var refused, failed atomic.Int64
	next := atomic.Int64{}
	const calls = 300
	for range 2 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < calls; i = next.Add(1) - 1 {
				thread := fmt.Sprintf("%04d", i) + strings.Repeat("t", 60_000)
				code, _ := a.rpc("mallory", sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, 10+i),
					map[string]string{"X-Mux-Thread-Id": thread})
				switch {
				case code == http.StatusBadRequest:
					refused.Add(1)
				case code != http.StatusOK:
					failed.Add(1)
				}
			}
		})
	}
	var during []time.Duration
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for i := 0; ; i++ {
		select {
		case <-done:
		default:
			if d, ok := victimOnce(1000 + i); ok {
				during = append(during, d)
			}
			continue
		}
		break
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second) // background record writes land
	total, largest := rd.sessionKeys(sid)
	fmt.Printf("threads: %d calls as new 60 KB threads in %s (%d refused 400, %d failed); into Redis %.1f MB; the session's keys %d bytes (largest %d); %d bus notices, the largest %d bytes; victim p50 on the other replica (open, call, DELETE) %s before, %s during (%d runs); A: %s; B: %s\n",
		calls, took.Round(time.Millisecond), refused.Load(), failed.Load(), float64(rd.stat("stats", "total_net_input_bytes")-in0)/1e6,
		total, largest, notices.Load(), largestNotice.Load(), before.Round(10*time.Microsecond), p50(during).Round(10*time.Microsecond), len(during), a.stats(), b.stats())
	return nil
}

func attackZombies(bin, dir string, rd *attackRedis) error {
	ms, err := replicas(bin, dir, rd, `{"mcpServers": {}, "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`)
	if err != nil {
		return err
	}
	defer ms[0].stop()
	defer ms[1].stop()
	a, b := ms[0], ms[1]
	// Plain races: B's first request of the session against its DELETE on A.
	const races = 300
	var deleted []string
	for range races {
		sid := a.open("alice")
		if sid == "" {
			continue
		}
		var wg sync.WaitGroup
		wg.Go(func() { b.rpc("alice", sid, pingBody, nil) })
		if a.del("alice", sid) == http.StatusNoContent {
			deleted = append(deleted, sid)
		}
		wg.Wait()
	}
	zombies := func(sids []string) int {
		n := 0
		for _, sid := range sids {
			if code, _ := b.rpc("alice", sid, pingBody, nil); code == http.StatusOK {
				n++
			}
		}
		return n
	}
	time.Sleep(500 * time.Millisecond) // every notice delivered
	fmt.Printf("zombies, plain races: B serves %d of %d sessions DELETEd (204) on A while B's first request read them\n", zombies(deleted), len(deleted))
	// DELETEs while B's pub/sub link reconnects.
	var cached []string
	for range 20 {
		if sid := a.open("alice"); sid != "" {
			b.rpc("alice", sid, pingBody, nil) // B keeps it
			cached = append(cached, sid)
		}
	}
	for _, sid := range cached { // each DELETE right after the replicas' links broke
		_ = rd.c.Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err()
		a.del("alice", sid)
	}
	time.Sleep(time.Second)
	after1 := zombies(cached)
	time.Sleep(11 * time.Second)
	fmt.Printf("zombies, pub/sub reconnecting: B serves %d of %d DELETEd sessions 1 s after, %d after 12 s; B: %s\n", after1, len(cached), zombies(cached), b.stats())
	return nil
}

func attackCaps(bin, dir string, rd *attackRedis) error {
	const share = 5
	ms, err := replicas(bin, dir, rd, fmt.Sprintf(`{"mcpServers": {}, "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User",
		"max_sessions_per_user": %d, "session_idle_timeout_seconds": 2}}`, share))
	if err != nil {
		return err
	}
	defer ms[0].stop()
	defer ms[1].stop()
	var held []string
	for end, i := time.Now().Add(12*time.Second), 0; time.Now().Before(end); i++ {
		if i%5 == 0 { // once a second, try for more
			for j := range share {
				if sid := ms[j%2].open("mallory"); sid != "" {
					held = append(held, sid)
				}
			}
		}
		live := held[:0]
		for j, sid := range held { // in use, on either replica
			if code, _ := ms[j%2].rpc("mallory", sid, pingBody, nil); code == http.StatusOK {
				live = append(live, sid)
			}
		}
		held = live
		time.Sleep(200 * time.Millisecond)
	}
	var counted int64 // mallory's set: she is the only caller
	keys, _ := rd.c.Keys(context.Background(), "mcp-mux:{su:*").Result()
	for _, k := range keys {
		n, _ := rd.c.ZCard(context.Background(), k).Result()
		counted += n
	}
	fmt.Printf("caps: with a share of %d and a 2 s idle timeout, mallory holds %d live sessions after 12 s (Redis counts %d); A: %s\n",
		share, len(held), counted, ms[0].stats())
	return nil
}
