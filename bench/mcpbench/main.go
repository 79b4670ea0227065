// Command mcpbench measures what mcp-mux adds to a tools/call: it runs a
// go-sdk MCP server, mcp-mux and a no-op httputil.ReverseProxy (the floor for
// one extra HTTP hop in Go) as separate processes, calls the server directly,
// through the reverse proxy, and through the mux over both protocol eras
// (2025-11-25 sessions and sessionless 2026-07-28) in the same run, and
// reports latency (p50, p99), throughput, each process's CPU time per call
// (the client's included: a 2026-07-28 client does more per call) and the
// heap allocations per call of the process in the middle.
//
// Each -telemetry variant is a mux process of its own: "off" (no export),
// or a percentage of new traces sampled with spans exported over OTLP/HTTP
// to a receiver process that decodes and counts them. The client sends no
// traceparent, so the mux's root sampler decides. The CPU per call of a
// process in the middle includes what it did between its own turns (span
// batches exported late), shared among its paths by their calls.
//
// The cel and authzen variants put issue 36's policy on the call path: one
// policy.rules rule reading the arguments, or a policy.authzen decision
// asked of a local endpoint (a process of its own, which decodes each
// request and allows it). The processor variant puts one response-phase
// external processor (issue 37) on the call path: a local endpoint that
// decodes each request and passes it.
//
// The guards variant puts issue 37's built-in result guards on every
// result: redaction (known values and credential-shaped strings) and a
// budget no result reaches, so each result is parsed, scanned and counted.
//
//	go run ./bench/mcpbench [-duration 5s] [-sessions 1,16] [-telemetry off,100,1]
//	go run ./bench/mcpbench -telemetry off,cel,authzen -sessions 1
//	go run ./bench/mcpbench -telemetry off,processor,guards -sessions 1
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

func main() {
	role := flag.String("role", "", "internal: upstream, mux, revproxy, otlp, authzen or processor")
	upstreamURL := flag.String("upstream", "", "internal: upstream URL for -role mux and revproxy")
	otlp := flag.String("otlp", "", "internal: OTLP/HTTP endpoint for -role mux (empty: telemetry off)")
	ratio := flag.Float64("ratio", 1, "internal: share of new traces sampled for -role mux with -otlp")
	limits := flag.String("limits", "", "internal: the limits rule of -role mux, shared through -redis")
	policyBlock := flag.String("policy", "", "internal: the policy block of -role mux, or (a list) its processors")
	guards := flag.String("guards", "", "internal: the result_guards block of -role mux")
	redisURL := flag.String("redis", "redis://127.0.0.1:6379", "Redis of the limits variants")
	duration := flag.Duration("duration", 5*time.Second, "measuring time per run")
	warmup := flag.Duration("warmup", time.Second, "warm-up time per run")
	sessions := flag.String("sessions", "1,16", "comma-separated concurrent session counts")
	variants := flag.String("telemetry", "off,100,1", "comma-separated mux variants: off, a percentage of traces sampled with OTLP export on, limits (a Redis-shared rate on the call path), limits-inflight (a rate and calls in flight), cel (one policy rule over the arguments), authzen (a policy.authzen decision from a local endpoint), processor (one response-phase external processor on loopback) or guards (result_guards: redaction and a budget no result reaches)")
	rounds := flag.Int("rounds", 5, "alternating direct/mux rounds the measuring time is split into")
	profile := flag.String("muxprofile", "", "write the mux process's CPU profile to this file (FILE.telN for a telemetry variant's mux)")
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
		serveMux(*upstreamURL, *otlp, *ratio, *limits, *redisURL, *policyBlock, *guards)
		return
	case "revproxy":
		target, err := url.Parse(*upstreamURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		target.Path = ""
		rp := httputil.NewSingleHostReverseProxy(target)
		rp.ErrorLog = log.New(io.Discard, "", 0) // clients closing their sessions are not news
		serveChild(withMallocs(rp))
		return
	case "otlp":
		serveChild(otlpHandler())
		return
	case "authzen":
		serveChild(authzenHandler())
		return
	case "processor":
		serveChild(processorHandler())
		return
	}
	o := options{duration: *duration, warmup: *warmup, rounds: max(*rounds, 1), profile: *profile, redis: *redisURL}
	var err error
	if o.sessions, err = parseSessions(*sessions); err == nil {
		o.variants, err = parseVariants(*variants)
	}
	if err == nil {
		err = bench(o)
	}
	if err != nil {
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

// serveMux serves a mux in front of up; with otlp set it exports its spans
// there, sampling ratio of new traces; with limits, that rule is on the
// call path, its budget shared through the Redis at redisURL, and every
// caller is served under a profile (the policy path of issue 22); with
// policyBlock, that is its policy block (issue 36); with guards, that is
// its result_guards block (issue 37).
func serveMux(up, otlp string, ratio float64, limits, redisURL, policyBlock, guards string) {
	rules := ""
	if limits != "" {
		rules = `, "limits": {"rules": [` + limits + `]}` +
			`, "profiles": {"bench": {"include_tools": ["bench_*"], "exclude_tools": ["bench_fail"]}}, "inbound": {"default_profile": "bench"}`
	}
	switch {
	case strings.HasPrefix(policyBlock, "["): // the processor variant's list
		rules += `, "processors": ` + policyBlock
	case policyBlock != "":
		rules += `, "policy": ` + policyBlock
	}
	if guards != "" {
		rules += `, "result_guards": ` + guards
	}
	cfg, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {"bench": {"type": "http", "url": %q}}%s}`, up, rules)),
		config.LoadOptions{Filename: "bench.json"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var opts proxy.Options
	if limits != "" {
		c, err := storeclient.Dial(redisURL)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		opts.LimitStore = &ratelimit.Store{Client: c, KeyPrefix: fmt.Sprintf("mcpbench:%d:", os.Getpid())}
	}
	if otlp != "" {
		// No OTEL_* variable from the caller's environment changes what is measured.
		noEnv := func(string) (string, bool) { return "", false }
		opts.Telemetry = telemetry.Options{Enabled: true, Endpoint: otlp, Protocol: "http/protobuf", SampleRatio: ratio, Env: noEnv}
	}
	srv := proxy.New(opts)
	if err := srv.Apply(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_ = srv.WaitDiscovery(ctx)
	cancel()
	serveChild(withMallocs(srv.Handler()))
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Close(ctx)
}

// authzenHandler is a local AuthZEN Access Evaluation endpoint: it
// decodes each request, as a decision point must, and allows it.
func authzenHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Subject  map[string]any `json:"subject"`
			Action   map[string]any `json:"action"`
			Resource map[string]any `json:"resource"`
			Context  map[string]any `json:"context"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Action["name"] == nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"decision": true}`)
	})
}

// processorHandler is a local external processor: it decodes each
// request, as a processor must, and passes the call.
func processorHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Phase  string          `json:"phase"`
			Tool   string          `json:"tool"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Phase != "response" || len(req.Result) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"action": "pass"}`)
	})
}

// mallocsPath reports the process's cumulative heap allocation count.
const mallocsPath = "/bench/mallocs"

// withMallocs serves mallocsPath beside h.
func withMallocs(h http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.HandleFunc("GET "+mallocsPath, func(w http.ResponseWriter, _ *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprint(w, ms.Mallocs)
	})
	return mux
}

// mallocs asks a child started with withMallocs for its allocation count.
func mallocs(addr string) uint64 {
	resp, err := http.Get("http://" + addr + mallocsPath)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	n, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	return n
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
	allocs   float64                  // heap allocations per call in the process in the middle
}

// path is n client sessions on one endpoint, and what was measured on it.
type path struct {
	tool    string
	css     []*mcp.ClientSession
	lat     []time.Duration
	errs    int
	elapsed time.Duration
	cpu     map[string]time.Duration
	middle  string // address of the process between client and upstream ("" for direct)
	proc    string // its name in the processes measured
	allocs  uint64 // its heap allocations while recording
	sent    int    // successful calls, warm-up included
}

func openPath(url, middle, tool string, n int, version string) (*path, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcpbench", Version: "1"}, nil)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * n, MaxIdleConns: 4 * n}}
	p := &path{tool: tool, cpu: map[string]time.Duration{}, middle: middle}
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
	var mallocsBefore uint64
	if record && p.middle != "" {
		mallocsBefore = mallocs(p.middle)
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
	p.sent += len(lat)
	if !record {
		return
	}
	if p.middle != "" {
		p.allocs += mallocs(p.middle) - mallocsBefore
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
	r.allocs = float64(p.allocs) / float64(r.calls)
	return r, nil
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return strings.Count(string(b), "processor\t:")
}
