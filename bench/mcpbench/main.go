// Command mcpbench measures what mcp-mux adds to a tools/call: it runs a
// go-sdk MCP server and mcp-mux as separate processes, calls the server
// directly and through the mux in the same run, and reports latency (p50,
// p99), throughput and each process's CPU time per call.
//
//	go run ./bench/mcpbench [-duration 5s] [-sessions 1,16]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/proxy"
)

func main() {
	role := flag.String("role", "", "internal: upstream or mux")
	upstreamURL := flag.String("upstream", "", "internal: upstream URL for -role mux")
	duration := flag.Duration("duration", 5*time.Second, "measuring time per run")
	warmup := flag.Duration("warmup", time.Second, "warm-up time per run")
	sessions := flag.String("sessions", "1,16", "comma-separated concurrent session counts")
	rounds := flag.Int("rounds", 5, "alternating direct/mux rounds the measuring time is split into")
	profile := flag.String("muxprofile", "", "write the mux process's CPU profile to this file")
	flag.Parse()
	if *role != "" && *profile != "" {
		f, err := os.Create(*profile)
		if err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	switch *role {
	case "upstream":
		serveChild(mcpHandler(mcptest.NewServer("bench")))
		return
	case "mux":
		serveMux(*upstreamURL)
		return
	}
	if err := bench(*duration, *warmup, max(*rounds, 1), *sessions, *profile); err != nil {
		fmt.Fprintln(os.Stderr, "mcpbench:", err)
		os.Exit(1)
	}
}

func mcpHandler(s *mcp.Server) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	return mux
}

// serveChild listens on a free loopback port, prints the address, and serves
// until stdin closes or a signal arrives.
func serveChild(h http.Handler) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().String())
	go func() { _ = http.Serve(ln, h) }()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); stop() }()
	<-ctx.Done()
}

func serveMux(up string) {
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {"bench": {"type": "http", "url": %q}}}`, up)),
		config.LoadOptions{Filename: "bench.json"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	srv := proxy.New(proxy.Options{})
	if err := srv.Apply(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = srv.WaitDiscovery(ctx)
	cancel()
	serveChild(srv.Handler())
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Close(ctx)
}

type child struct {
	cmd   *exec.Cmd
	addr  string
	stdin io.WriteCloser
}

func startChild(args ...string) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("child did not report its address: %w", err)
	}
	return &child{cmd: cmd, addr: strings.TrimSpace(line), stdin: stdin}, nil
}

func (c *child) stop() {
	_ = c.stdin.Close()
	done := make(chan struct{})
	go func() { _ = c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = c.cmd.Process.Kill()
		<-done
	}
}

// cpuTime returns the user+system CPU time a process has used so far.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	const hz = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / hz
}

type result struct {
	calls    int
	errors   int
	p50, p99 time.Duration
	rate     float64
	cpu      map[string]time.Duration // per call, by process
}

// path is n client sessions on one endpoint, and what was measured on it.
type path struct {
	tool    string
	css     []*mcp.ClientSession
	lat     []time.Duration
	errs    int
	elapsed time.Duration
	cpu     map[string]time.Duration
}

func openPath(url, tool string, n int, version string) (*path, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * n, MaxIdleConns: 4 * n}}
	p := &path{tool: tool, cpu: map[string]time.Duration{}}
	for range n {
		cs, err := client.Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true},
			&mcp.ClientSessionOptions{ProtocolVersion: version})
		if err != nil {
			p.close()
			return nil, err
		}
		p.css = append(p.css, cs)
	}
	return p, nil
}

func (p *path) close() {
	for _, cs := range p.css {
		_ = cs.Close()
	}
}

// drive calls the echo tool on every session for d; when record is set it
// adds the latencies and the processes' CPU time to the path's totals.
func (p *path) drive(d time.Duration, record bool, procs map[string]int) {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		lat  []time.Duration
		errs int
	)
	before := map[string]time.Duration{}
	for k, pid := range procs {
		before[k] = cpuTime(pid)
	}
	start := time.Now()
	until := start.Add(d)
	for _, cs := range p.css {
		wg.Go(func() {
			params := &mcp.CallToolParams{Name: p.tool, Arguments: map[string]any{"text": "hello from mcpbench"}}
			var local []time.Duration
			e := 0
			for time.Now().Before(until) {
				t0 := time.Now()
				if _, err := cs.CallTool(context.Background(), params); err != nil {
					e++
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, local...)
			errs += e
			mu.Unlock()
		})
	}
	wg.Wait()
	if !record {
		return
	}
	p.elapsed += time.Since(start)
	p.lat = append(p.lat, lat...)
	p.errs += errs
	for k, pid := range procs {
		p.cpu[k] += cpuTime(pid) - before[k]
	}
}

func (p *path) result() (result, error) {
	r := result{calls: len(p.lat), errors: p.errs, cpu: map[string]time.Duration{}}
	if r.calls == 0 {
		return r, fmt.Errorf("no successful calls (%d errors)", p.errs)
	}
	lat := slices.Clone(p.lat)
	slices.Sort(lat)
	r.p50 = lat[len(lat)/2]
	r.p99 = lat[len(lat)*99/100]
	r.rate = float64(r.calls) / p.elapsed.Seconds()
	for k, c := range p.cpu {
		r.cpu[k] = c / time.Duration(r.calls)
	}
	return r, nil
}

func bench(d, warm time.Duration, rounds int, sessionList, profile string) error {
	up, err := startChild("-role", "upstream")
	if err != nil {
		return err
	}
	defer up.stop()
	upURL := "http://" + up.addr + "/mcp"
	mx, err := startChild("-role", "mux", "-upstream", upURL, "-muxprofile", profile)
	if err != nil {
		return err
	}
	defer mx.stop()
	muxURL := "http://" + mx.addr + "/mcp"

	fmt.Printf("mcpbench: echo tool, %s per path in %d alternating rounds after %s warm-up, %d CPUs\n",
		d, rounds, warm, numCPU())
	fmt.Printf("%-9s %-8s %9s %9s %10s %8s %14s %14s\n", "sessions", "path", "p50", "p99", "calls/s", "errors", "upstream cpu/call", "mux cpu/call")
	for _, s := range strings.Split(sessionList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("bad session count %q", s)
		}
		procs := map[string]int{"upstream": up.cmd.Process.Pid, "mux": mx.cmd.Process.Pid}
		dp, err := openPath(upURL, "echo", n, "2025-11-25")
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		viaMux, err := openPath(muxURL, "bench_echo", n, "2025-11-25")
		if err != nil {
			dp.close()
			return fmt.Errorf("via mux: %w", err)
		}
		// The same mux over the sessionless 2026-07-28 leg.
		viaModern, err := openPath(muxURL, "bench_echo", n, "2026-07-28")
		if err != nil {
			dp.close()
			viaMux.close()
			return fmt.Errorf("via mux (2026-07-28): %w", err)
		}
		dp.drive(warm, false, procs)
		viaMux.drive(warm, false, procs)
		viaModern.drive(warm, false, procs)
		// Alternate short rounds so that drift on a shared machine hits every path alike.
		for range rounds {
			dp.drive(d/time.Duration(rounds), true, procs)
			viaMux.drive(d/time.Duration(rounds), true, procs)
			viaModern.drive(d/time.Duration(rounds), true, procs)
		}
		dp.close()
		viaMux.close()
		viaModern.close()
		direct, err := dp.result()
		if err != nil {
			return fmt.Errorf("direct: %w", err)
		}
		proxied, err := viaMux.result()
		if err != nil {
			return fmt.Errorf("via mux: %w", err)
		}
		modern, err := viaModern.result()
		if err != nil {
			return fmt.Errorf("via mux (2026-07-28): %w", err)
		}
		for _, row := range []struct {
			name string
			r    result
		}{{"direct", direct}, {"mux", proxied}, {"mux-2026", modern}} {
			fmt.Printf("%-9d %-8s %9s %9s %10.0f %8d %14s %14s\n", n, row.name,
				row.r.p50.Round(time.Microsecond), row.r.p99.Round(time.Microsecond), row.r.rate, row.r.errors,
				row.r.cpu["upstream"].Round(100*time.Nanosecond), row.r.cpu["mux"].Round(100*time.Nanosecond))
		}
		fmt.Printf("ratios at %d session(s): p50 %.2fx direct, throughput %.2fx direct, mux cpu/call %.2fx upstream cpu/call\n",
			n, float64(proxied.p50)/float64(direct.p50), proxied.rate/direct.rate,
			float64(proxied.cpu["mux"])/float64(proxied.cpu["upstream"]))
		fmt.Printf("2026-07-28 leg at %d session(s): p50 %.2fx direct, throughput %.2fx direct, mux cpu/call %.2fx upstream cpu/call\n",
			n, float64(modern.p50)/float64(direct.p50), modern.rate/direct.rate,
			float64(modern.cpu["mux"])/float64(modern.cpu["upstream"]))
	}
	return nil
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}
