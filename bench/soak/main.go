// Command soak runs mcp-mux in-process under a long mixed load and checks
// that it does not leak: 64 downstream sessions for 10 minutes make calls,
// cancel calls, list tools and reconnect, while the HTTP upstream restarts,
// the stdio servers are killed, and the config is reloaded. It reports
// goroutines, open fds, RSS and stdio processes once a minute, and fails
// (exit 1) unless the figures at the end are within a small slack of those
// after warm-up and no stdio process is left once the mux has closed.
//
//	go run ./bench/soak [-duration 10m] [-sessions 64]
//
// It is not part of go test: it takes minutes.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

func main() {
	mcptest.MaybeServeStdio() // this binary is also the stdio server
	duration := flag.Duration("duration", 10*time.Minute, "how long the load runs")
	sessions := flag.Int("sessions", 64, "concurrent downstream sessions")
	warmup := flag.Duration("warmup", 45*time.Second, "load time before the baseline is taken")
	flag.Parse()
	if err := soak(*duration, *warmup, *sessions); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// sample is one measurement of the mux process.
type sample struct {
	at         time.Duration
	goroutines int
	fds        int
	rssKiB     int
	procs      int
}

func (s sample) String() string {
	return fmt.Sprintf("%7s  goroutines %5d  fds %4d  rss %7.1f MiB  stdio processes %3d",
		s.at.Round(time.Second), s.goroutines, s.fds, float64(s.rssKiB)/1024, s.procs)
}

// counters are the load's outcomes.
type counters struct {
	calls, callErrors, cancels, lists, reconnects, reloads, httpRestarts, stdioKills atomic.Int64
}

func soak(duration, warmup time.Duration, nSessions int) error {
	marker := fmt.Sprintf("soak-%d", os.Getpid())
	start := time.Now()

	// The HTTP upstream: a go-sdk server that restarts on the same port.
	web, err := newRestartable()
	if err != nil {
		return err
	}
	defer web.close()

	command, args, env := mcptest.StdioServer(marker, mcptest.StdioOptions{})
	servers := func(extra bool) map[string]any {
		m := map[string]any{
			"web":   map[string]any{"type": "http", "url": web.url()},
			"local": map[string]any{"type": "stdio", "command": command, "args": args, "env": env},
		}
		if extra {
			m["web2"] = map[string]any{"type": "http", "url": web.url(), "tool_call_timeout": 30}
		}
		return m
	}
	parse := func(extra bool) (*config.Config, error) {
		b := mustJSON(map[string]any{"mcpServers": servers(extra)})
		return config.Parse(b, config.LoadOptions{Filename: "extensions_config.json"})
	}
	cfg, err := parse(false)
	if err != nil {
		return err
	}
	srv := proxy.New(proxy.Options{Version: "soak", RetryMin: 200 * time.Millisecond, RetryMax: 2 * time.Second})
	if err := srv.Apply(cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := srv.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	endpoint := "http://" + ln.Addr().String() + "/mcp"
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	_ = srv.WaitDiscovery(wctx)
	wcancel()

	var c counters
	// gate pauses the load for a measurement: every operation and every
	// disturbance holds it shared; measuring holds it exclusively, so the
	// figures compare a quiet mux with the same sessions open each time.
	var gate sync.RWMutex
	var extra atomic.Bool // the reloads toggle a third server
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	tr := &http.Transport{MaxIdleConnsPerHost: nSessions}
	client := &http.Client{Transport: tr}
	for i := range nSessions {
		wg.Go(func() { runSession(ctx, i, endpoint, client, &c, &gate) })
	}
	// Disturbances: HTTP upstream restarts, stdio kills, reloads.
	wg.Go(func() {
		every(ctx, &gate, 37*time.Second, func() {
			if err := web.restart(); err != nil {
				fmt.Fprintln(os.Stderr, "restarting the HTTP upstream:", err)
				return
			}
			c.httpRestarts.Add(1)
		})
	})
	wg.Go(func() {
		every(ctx, &gate, 29*time.Second, func() {
			for _, pid := range processesWith("MCPTEST_STDIO_SERVER=" + marker) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				c.stdioKills.Add(1)
			}
		})
	})
	wg.Go(func() {
		every(ctx, &gate, 23*time.Second, func() {
			next, err := parse(!extra.Load())
			extra.Store(!extra.Load())
			if ev := srv.Reload("soak", next, err); ev.Outcome == proxy.ReloadRejected {
				fmt.Fprintln(os.Stderr, "reload rejected:", ev.Problems)
			}
			c.reloads.Add(1)
		})
	})

	measure := func() sample {
		return sample{at: time.Since(start), goroutines: runtime.NumGoroutine(), fds: openFDs(), rssKiB: rssKiB(),
			procs: len(processesWith("MCPTEST_STDIO_SERVER=" + marker))}
	}
	// quiet pauses the load, lets reconnects and closing connections settle
	// (goroutines and fds unchanged for three seconds), measures, and resumes.
	quiet := func() sample {
		gate.Lock()
		defer gate.Unlock()
		if extra.Load() { // measure the same config each time
			next, err := parse(false)
			srv.Reload("soak", next, err)
			extra.Store(false)
			c.reloads.Add(1)
		}
		tr.CloseIdleConnections()
		prev, same := measure(), 0
		for range 90 {
			time.Sleep(time.Second) // settling is what is being waited for: it has no event
			runtime.GC()
			cur := measure()
			if cur.goroutines == prev.goroutines && cur.fds == prev.fds {
				if same++; same == 3 {
					return cur
				}
			} else {
				same = 0
			}
			prev = cur
		}
		return prev
	}
	fmt.Printf("soak: %d sessions for %s against %s (warm-up %s)\n", nSessions, duration, endpoint, warmup)
	time.Sleep(warmup) // the load itself is what warms up; nothing to wait on
	base := quiet()
	fmt.Println("baseline", base, "(load paused)")
	tick := time.NewTicker(time.Minute)
	deadline := time.After(duration - warmup)
loop:
	for {
		select {
		case <-tick.C:
			fmt.Println("        ", measure(), loadLine(&c))
		case <-deadline:
			break loop
		}
	}
	tick.Stop()
	end := quiet()
	fmt.Println("end     ", end, "(load paused)", loadLine(&c))

	// Stop the load, close the mux, and look for leftovers.
	stop()
	wg.Wait()
	tr.CloseIdleConnections()
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = hs.Shutdown(cctx)
	_ = srv.Close(cctx)
	ccancel()
	var left []int
	for range 100 { // killed process groups take a moment to be reaped
		if left = processesWith("MCPTEST_STDIO_SERVER=" + marker); len(left) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	runtime.GC()
	after := measure()
	fmt.Println("closed  ", after)

	var problems []string
	if slack := max(64, base.goroutines/10); end.goroutines > base.goroutines+slack {
		problems = append(problems, fmt.Sprintf("goroutines grew from %d to %d (slack %d)", base.goroutines, end.goroutines, slack))
	}
	if end.fds > base.fds+32 {
		problems = append(problems, fmt.Sprintf("open fds grew from %d to %d (slack 32)", base.fds, end.fds))
	}
	if limit := base.rssKiB*5/4 + 16<<10; end.rssKiB > limit {
		problems = append(problems, fmt.Sprintf("RSS grew from %d KiB to %d KiB (limit %d)", base.rssKiB, end.rssKiB, limit))
	}
	if len(left) > 0 {
		problems = append(problems, fmt.Sprintf("stdio processes left after the mux closed: %v", left))
	}
	if c.calls.Load() == 0 || c.reloads.Load() == 0 || c.httpRestarts.Load() == 0 || c.stdioKills.Load() == 0 {
		problems = append(problems, "the load did not exercise every disturbance: "+loadLine(&c))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	fmt.Println("ok: goroutines, fds and RSS flat; no stdio process left")
	return nil
}

func loadLine(c *counters) string {
	return fmt.Sprintf("| calls %d (errors %d) cancels %d lists %d reconnects %d reloads %d http restarts %d stdio kills %d",
		c.calls.Load(), c.callErrors.Load(), c.cancels.Load(), c.lists.Load(), c.reconnects.Load(), c.reloads.Load(),
		c.httpRestarts.Load(), c.stdioKills.Load())
}

// runSession is one downstream client: it keeps a session and mixes calls
// to both servers, cancelled calls, tools/list and reconnects until ctx ends.
func runSession(ctx context.Context, i int, endpoint string, hc *http.Client, c *counters, gate *sync.RWMutex) {
	r := rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano())))
	client := mcp.NewClient(&mcp.Implementation{Name: "soak", Version: "1"}, nil)
	var cs *mcp.ClientSession
	defer func() {
		if cs != nil {
			_ = cs.Close()
		}
	}()
	for ctx.Err() == nil {
		gate.RLock()
		cs = step(ctx, r, client, cs, endpoint, hc, c)
		gate.RUnlock()
		pause(ctx, time.Duration(20+r.IntN(60))*time.Millisecond)
	}
}

// step runs one operation on cs (connecting first when it is nil) and
// returns the session to use next.
func step(ctx context.Context, r *rand.Rand, client *mcp.Client, cs *mcp.ClientSession, endpoint string, hc *http.Client, c *counters) *mcp.ClientSession {
	{
		if cs == nil {
			var err error
			cs, err = client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc}, nil)
			if err != nil {
				return nil
			}
		}
		server := "web"
		if r.IntN(2) == 0 {
			server = "local"
		}
		switch n := r.IntN(100); {
		case n < 70:
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			res, err := cs.CallTool(cctx, &mcp.CallToolParams{Name: server + "_echo", Arguments: map[string]any{"text": "soak " + strconv.Itoa(n)}})
			cancel()
			c.calls.Add(1)
			if err != nil || res.IsError {
				c.callErrors.Add(1)
			}
		case n < 80:
			cctx, cancel := context.WithTimeout(ctx, time.Duration(5+r.IntN(40))*time.Millisecond)
			_, _ = cs.CallTool(cctx, &mcp.CallToolParams{Name: server + "_sleep", Arguments: map[string]any{"ms": 500}})
			cancel()
			c.cancels.Add(1)
		case n < 95:
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, _ = cs.ListTools(cctx, nil)
			cancel()
			c.lists.Add(1)
		default:
			_ = cs.Close()
			cs = nil
			c.reconnects.Add(1)
		}
	}
	return cs
}

func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func every(ctx context.Context, gate *sync.RWMutex, d time.Duration, f func()) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			gate.RLock()
			f()
			gate.RUnlock()
		}
	}
}

// restartable is an in-process HTTP MCP server that can restart on its port.
type restartable struct {
	mu   sync.Mutex
	addr string
	srv  *http.Server
	mcp  *mcp.Server
}

func newRestartable() (*restartable, error) {
	r := &restartable{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	return r, nil
}

func (r *restartable) url() string { return "http://" + r.addr + "/mcp" }

func (r *restartable) serve(ln net.Listener) {
	r.mcp = mcptest.NewServer("web")
	s := r.mcp
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	// A short idle timeout lets a paused load's keep-alive connections to
	// this server close, so that measurements do not count the mux's idle
	// connection pool (two fds each, both ends being in this process).
	r.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
}

// restart drops every connection and session, as a restarted server would,
// and serves again on the same address.
func (r *restartable) restart() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
	var ln net.Listener
	var err error
	for range 50 {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	r.serve(ln)
	return nil
}

func (r *restartable) stopLocked() {
	_ = r.srv.Close()
	for ss := range r.mcp.Sessions() {
		_ = ss.Close()
	}
}

func (r *restartable) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopLocked()
}

func openFDs() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

func rssKiB() int {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

// processesWith returns the live processes whose environment has kv.
func processesWith(kv string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] == 'Z' {
			continue
		}
		environ, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		for _, v := range bytes.Split(environ, []byte{0}) {
			if string(v) == kv {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
