// Command sessionmem measures what an idle 2025-11-25 session costs
// mcp-mux in memory. It runs the mcp-mux binary (built, or -bin) in front of
// an in-process go-sdk HTTP server with one echo tool, opens -sessions
// sessions (never closed) and waits until the mux's RSS
// settles (the mux cannot be made to collect garbage from outside: two
// samples 500 ms apart within 1%), and reports the growth per session: RSS
// (VmRSS), Go heap and goroutine stacks in use (/metrics), goroutines and
// open fds, and, with store.redis_url set, Redis used_memory per session.
// After -idle it measures again (a mux that evicts idle sessions shows it
// there) and then checks that every session still answers a call.
//
// The sessions are opened by -clients: raw (Streamable HTTP spoken raw:
// initialize, notifications/initialized, one tools/call of up_echo; no GET
// stream) or sdk (go-sdk clients, mcp.StreamableClientTransport pinned to
// 2025-11-25: initialize, one tools/call, and the standalone GET stream
// open as the go-sdk client opens it), run in this process, not the mux's.
//
// Each combination runs on a fresh mux, upstream and redis-server:
// mode local (no store) or redis (store.redis_url on a private
// redis-server), and conns shared (one keep-alive client for every
// session: the sessions' own cost) or each (a client, and so a held TCP
// connection, per session: what as many separate clients cost).
//
//	go run ./bench/sessionmem [-sessions 1000] [-clients raw,sdk] [-conns shared,each] [-redis both|off|only] [-idle 30s] [-bin PATH] [-json]
//
// The issue 20 targets: at most 26 KiB of mux RSS per idle session, with
// and without Redis, and at most 2 KiB of Redis memory per session.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	o := defaultOptions()
	flag.IntVar(&o.Sessions, "sessions", o.Sessions, "idle sessions opened per run")
	flag.StringVar(&o.Bin, "bin", "", "the mcp-mux binary (default: go build ./cmd/mcp-mux into a temporary directory)")
	clientKinds := flag.String("clients", "raw,sdk", "session clients: raw (raw requests, no GET stream), sdk (go-sdk clients with their GET stream), or both as a list")
	conns := flag.String("conns", "shared,each", "connection modes: shared (one keep-alive client), each (a TCP connection per session), or both as a list")
	modes := flag.String("redis", "both", "store modes: off (local only), only (redis only), both")
	flag.DurationVar(&o.Idle, "idle", o.Idle, "after the settled measurement, wait this long, measure again and probe the sessions (0: skip)")
	flag.IntVar(&o.Warmup, "warmup", o.Warmup, "sessions opened before the baseline is taken")
	asJSON := flag.Bool("json", false, "print the results as JSON instead of a table")
	flag.Parse()
	var err error
	if o.Conns, err = parseList(*conns, "shared", "each"); err != nil {
		fail(fmt.Errorf("-conns: %w", err))
	}
	if o.Clients, err = parseList(*clientKinds, clientRaw, clientSDK); err != nil {
		fail(fmt.Errorf("-clients: %w", err))
	}
	switch *modes {
	case "both":
		o.Modes = []string{modeLocal, modeRedis}
	case "off":
		o.Modes = []string{modeLocal}
	case "only":
		o.Modes = []string{modeRedis}
	default:
		fail(fmt.Errorf("-redis: %q is not off, only or both", *modes))
	}
	if o.Sessions < 1 {
		fail(errors.New("-sessions must be at least 1"))
	}
	o.Progress = os.Stderr
	results, err := run(context.Background(), o)
	if err != nil {
		fail(err)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(results)
		return
	}
	printTable(os.Stdout, o, results)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "sessionmem:", err)
	os.Exit(1)
}

func parseList(s string, allowed ...string) ([]string, error) {
	if s == "both" {
		return allowed, nil
	}
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		v = strings.TrimSpace(v)
		found := false
		for _, a := range allowed {
			found = found || v == a
		}
		if !found {
			return nil, fmt.Errorf("%q is not one of %s", v, strings.Join(allowed, ", "))
		}
		out = append(out, v)
	}
	return out, nil
}

const (
	modeLocal = "local"
	modeRedis = "redis"

	clientRaw = "raw"
	clientSDK = "sdk"
)

// options are one invocation's settings.
type options struct {
	Sessions  int
	Bin       string
	Clients   []string // raw, sdk
	Conns     []string
	Modes     []string
	Idle      time.Duration
	Warmup    int
	Workers   int           // sessions opened concurrently
	Interval  time.Duration // between RSS samples while settling
	SettleMax time.Duration // settling gives up after this long
	Progress  io.Writer     // progress lines (nil: none)
}

func defaultOptions() options {
	return options{Sessions: 1000, Clients: []string{clientRaw, clientSDK}, Idle: 30 * time.Second, Warmup: 8, Workers: 8,
		Interval: 500 * time.Millisecond, SettleMax: 30 * time.Second}
}

// Sample is one measurement of the mux (and its Redis).
type Sample struct {
	RSS        int64 `json:"rss_bytes"`         // VmRSS
	HeapInuse  int64 `json:"heap_inuse_bytes"`  // go_memstats_heap_inuse_bytes; -1 when /metrics lacks it
	StackInuse int64 `json:"stack_inuse_bytes"` // go_memstats_stack_inuse_bytes (goroutine stacks); -1 when /metrics lacks it
	Goroutines int   `json:"goroutines"`        // go_goroutines; -1 when /metrics lacks it
	FDs        int   `json:"fds"`               // open file descriptors
	RedisUsed  int64 `json:"redis_used_memory_bytes,omitempty"`
	Settled    bool  `json:"settled"` // two samples an interval apart were within 1%
}

// Result is one run: a mode and a connection mode.
type Result struct {
	Client   string `json:"client"` // raw, sdk
	Mode     string `json:"mode"`   // local, redis
	Conns    string `json:"conns"`  // shared, each
	Sessions int    `json:"sessions"`
	// Opened counts the sessions that initialized and answered their call.
	Opened int `json:"opened"`
	// UpstreamCalls counts the echo calls the upstream answered (warm-up included).
	UpstreamCalls int64 `json:"upstream_calls"`
	// UpstreamSessions are the sessions open at the upstream at the
	// baseline and after the sessions were opened; UpstreamInits counts
	// the sessions the mux initialized there while they were opened (the
	// mux pools them: upstream max_sessions, 256 by default for http).
	UpstreamSessionsBefore int    `json:"upstream_sessions_before"`
	UpstreamSessionsAfter  int    `json:"upstream_sessions_after"`
	UpstreamInits          int64  `json:"upstream_inits"`
	Before                 Sample `json:"before"`
	After                  Sample `json:"after"`
	// PerSession is After less Before, per session.
	PerSession PerSession `json:"per_session"`

	// After -idle: a third sample, its growth over Before per session, and
	// how many sessions still answered a tools/call (probed after it).
	IdleFor        time.Duration `json:"idle_ns,omitempty"`
	Idle           *Sample       `json:"idle,omitempty"`
	IdlePerSession *PerSession   `json:"idle_per_session,omitempty"`
	Answered       int           `json:"answered_after_idle,omitempty"`
}

// PerSession is the growth of a mux between two samples, per session.
type PerSession struct {
	RSSKiB     float64  `json:"rss_kib"`
	HeapKiB    float64  `json:"heap_kib"`
	StackKiB   float64  `json:"stack_kib"`
	Goroutines float64  `json:"goroutines"`
	FDs        float64  `json:"fds"`
	RedisBytes *float64 `json:"redis_bytes,omitempty"` // mode redis only
}

func growth(before, after Sample, n int, redis bool) PerSession {
	f := float64(n)
	p := PerSession{
		RSSKiB:     float64(after.RSS-before.RSS) / 1024 / f,
		HeapKiB:    float64(after.HeapInuse-before.HeapInuse) / 1024 / f,
		StackKiB:   float64(after.StackInuse-before.StackInuse) / 1024 / f,
		Goroutines: float64(after.Goroutines-before.Goroutines) / f,
		FDs:        float64(after.FDs-before.FDs) / f,
	}
	if redis {
		v := float64(after.RedisUsed-before.RedisUsed) / f
		p.RedisBytes = &v
	}
	return p
}

// run measures every mode × conns combination, each on a fresh mux.
func run(ctx context.Context, o options) ([]Result, error) {
	dir, err := os.MkdirTemp("", "sessionmem-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if o.Bin == "" {
		if o.Bin, err = buildMux(ctx, dir); err != nil {
			return nil, err
		}
	}
	var out []Result
	for _, client := range o.Clients {
		for _, mode := range o.Modes {
			for _, conns := range o.Conns {
				r, err := measure(ctx, o, dir, combo{client: client, mode: mode, conns: conns})
				if err != nil {
					return out, fmt.Errorf("%s/%s/%s: %w", client, mode, conns, err)
				}
				out = append(out, r)
			}
		}
	}
	return out, nil
}

// buildMux builds ./cmd/mcp-mux of this module into dir.
func buildMux(ctx context.Context, dir string) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	bin := filepath.Join(dir, "mcp-mux")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/mcp-mux")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/mcp-mux: %w\n%s", err, out)
	}
	return bin, nil
}

func (o options) progress(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "sessionmem: "+format+"\n", args...)
	}
}

// combo is one run's client kind, store mode and connection mode.
type combo struct{ client, mode, conns string }

// driver opens and probes one run's sessions: raw or go-sdk clients.
type driver struct {
	open  func(ctx context.Context, n, workers int, prefix string) (int, error)
	probe func(ctx context.Context, workers int) int // the sessions of the last open
	close func()
}

// newDriver returns the driver of client kind client on m.
func newDriver(m *muxProcess, client, conns string) driver {
	if client == clientSDK {
		cs := newSDKClients(conns)
		return driverOf(func(ctx context.Context, name string) (*sdkSession, error) { return m.openSDK(ctx, cs, name) },
			func(ctx context.Context, s *sdkSession) error { return s.call(ctx) }, cs.close)
	}
	cs := newClients(conns)
	return driverOf(func(ctx context.Context, name string) (*session, error) { return m.open(ctx, cs.next(), name) },
		func(ctx context.Context, s *session) error { return m.call(ctx, s) }, cs.close)
}

// driverOf is the driver of sessions that open opens (by name) and call
// calls the echo tool on.
func driverOf[S any](open func(ctx context.Context, name string) (*S, error), call func(context.Context, *S) error, close func()) driver {
	var last []*S
	return driver{
		open: func(ctx context.Context, n, workers int, prefix string) (int, error) {
			s, err := openN(ctx, n, workers, func(ctx context.Context, i int) (*S, error) {
				return open(ctx, prefix+"-"+strconv.Itoa(i))
			})
			last = s
			return len(s), err
		},
		probe: func(ctx context.Context, workers int) int {
			var ok atomic.Int64
			eachN(ctx, len(last), workers, func(i int) bool {
				if call(ctx, last[i]) == nil {
					ok.Add(1)
				}
				return true
			})
			return int(ok.Load())
		},
		close: close,
	}
}

// openN opens n sessions with open, up to workers at a time; it stops at
// the first failure and returns those opened.
func openN[S any](ctx context.Context, n, workers int, open func(ctx context.Context, i int) (*S, error)) ([]*S, error) {
	out := make([]*S, n)
	var firstErr error
	var errOnce sync.Once
	eachN(ctx, n, workers, func(i int) bool {
		s, err := open(ctx, i)
		if err != nil {
			errOnce.Do(func() { firstErr = fmt.Errorf("session %d: %w", i, err) })
			return false
		}
		out[i] = s
		return true
	})
	opened := out[:0]
	for _, s := range out {
		if s != nil {
			opened = append(opened, s)
		}
	}
	if firstErr == nil && len(opened) < n {
		firstErr = ctx.Err()
	}
	return opened, firstErr
}

// eachN runs fn(i) for i in [0, n), up to workers at a time, until ctx
// ends or an fn returns false (the others then take no new i).
func eachN(ctx context.Context, n, workers int, fn func(i int) bool) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(1, min(workers, n)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if !fn(i) {
					next.Store(int64(n)) // stop the others
					return
				}
			}
		})
	}
	wg.Wait()
}

// measure is one run on a fresh upstream, redis-server (mode redis) and mux.
func measure(ctx context.Context, o options, dir string, c combo) (Result, error) {
	mode, conns := c.mode, c.conns
	name := c.client + "/" + mode + "/" + conns
	r := Result{Client: c.client, Mode: mode, Conns: conns, Sessions: o.Sessions}
	runDir, err := os.MkdirTemp(dir, c.client+"-"+mode+"-"+conns+"-")
	if err != nil {
		return r, err
	}
	up, err := startUpstream()
	if err != nil {
		return r, err
	}
	defer up.close() // after the mux has stopped: it closes its upstream sessions
	var rd *redisServer
	if mode == modeRedis {
		if rd, err = startRedis(ctx, runDir); err != nil {
			return r, err
		}
		defer rd.stop()
	}
	cfgPath := filepath.Join(runDir, "config.json")
	if err := os.WriteFile(cfgPath, muxConfig(up.url(), rd, o.Warmup+o.Sessions), 0o600); err != nil {
		return r, err
	}
	m, err := startMux(ctx, o.Bin, cfgPath, runDir)
	if err != nil {
		return r, err
	}
	defer m.stop()
	if err := m.waitReady(ctx, 30*time.Second); err != nil {
		return r, err
	}
	tools := newClients("shared")
	defer tools.close()
	if err := m.waitTools(ctx, tools.next(), 30*time.Second); err != nil {
		return r, err
	}
	d := newDriver(m, c.client, conns)
	defer d.close()

	// Warm-up: the first sessions bring in code, pools and caches a mux
	// has after its first clients; they stay open through the run.
	if _, err := d.open(ctx, o.Warmup, o.Workers, "warm-up"); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	r.Before = m.settle(ctx, rd, o.Interval, o.SettleMax)
	r.UpstreamSessionsBefore = up.sessions()
	initsBefore := up.inited.Load()
	o.progress("%s: baseline RSS %.1f MiB; opening %d sessions", name, float64(r.Before.RSS)/(1<<20), o.Sessions)

	r.Opened, err = d.open(ctx, o.Sessions, o.Workers, "s")
	if err != nil {
		return r, err
	}
	r.After = m.settle(ctx, rd, o.Interval, o.SettleMax)
	r.UpstreamSessionsAfter = up.sessions()
	r.UpstreamInits = up.inited.Load() - initsBefore
	r.UpstreamCalls = up.calls.Load()
	o.progress("%s: %d sessions open, RSS %.1f MiB", name, r.Opened, float64(r.After.RSS)/(1<<20))

	if o.Idle > 0 {
		o.progress("%s: idle for %s", name, o.Idle)
		select {
		case <-time.After(o.Idle):
		case <-ctx.Done():
			return r, ctx.Err()
		}
		s := m.settle(ctx, rd, o.Interval, o.SettleMax)
		r.Idle, r.IdleFor = &s, o.Idle
		r.Answered = d.probe(ctx, o.Workers)
	}
	r.PerSession = growth(r.Before, r.After, r.Sessions, rd != nil)
	if r.Idle != nil {
		p := growth(r.Before, *r.Idle, r.Sessions, rd != nil)
		r.IdlePerSession = &p
	}
	return r, nil
}

// muxConfig is the mux's config: the upstream "up", the store when rd is
// set, and inbound.max_sessions raised when sessions would exceed the default.
func muxConfig(upURL string, rd *redisServer, sessions int) []byte {
	cfg := map[string]any{"mcpServers": map[string]any{"up": map[string]any{"type": "http", "url": upURL}}}
	if rd != nil {
		cfg["store"] = map[string]any{"redis_url": "redis://" + rd.addr}
	}
	if limit := sessions + 64; limit > 10000 {
		cfg["inbound"] = map[string]any{"max_sessions": limit}
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return b
}

// within1pct reports whether b is within 1% of a.
func within1pct(a, b int64) bool {
	return math.Abs(float64(b-a)) <= math.Abs(float64(a))/100
}

func printTable(w io.Writer, o options, results []Result) {
	fmt.Fprintf(w, "sessionmem: %d idle 2025-11-25 sessions per run (initialize, notifications/initialized, one tools/call of up_echo; never closed)\n", o.Sessions)
	fmt.Fprintf(w, "clients: raw = raw requests, no GET stream; sdk = go-sdk clients, their GET stream open\n")
	fmt.Fprintf(w, "after %d warm-up sessions; %d CPUs; per session = (settled after - settled before) / sessions\n\n", o.Warmup, runtime.NumCPU())
	header := func() {
		fmt.Fprintf(w, "%-6s %-6s %-7s %10s %10s %10s %10s %10s %10s  %s\n", "client", "mode", "conns", "RSS KiB", "heap KiB", "stack KiB",
			"goroutines", "fds", "Redis B", "notes")
	}
	row := func(r Result, p PerSession, notes string) {
		redis := "-"
		if p.RedisBytes != nil {
			redis = fmt.Sprintf("%.1f", *p.RedisBytes)
		}
		fmt.Fprintf(w, "%-6s %-6s %-7s %10.1f %10.1f %10.1f %10.2f %10.2f %10s  %s\n", r.Client, r.Mode, r.Conns, p.RSSKiB, p.HeapKiB, p.StackKiB,
			p.Goroutines, p.FDs, redis, notes)
	}
	header()
	for _, r := range results {
		notes := fmt.Sprintf("%d/%d ok; RSS %.1f→%.1f MiB; upstream sessions %d→%d (%d opened)", r.Opened, r.Sessions,
			float64(r.Before.RSS)/(1<<20), float64(r.After.RSS)/(1<<20), r.UpstreamSessionsBefore, r.UpstreamSessionsAfter, r.UpstreamInits)
		if !r.Before.Settled || !r.After.Settled {
			notes += "; RSS did not settle"
		}
		row(r, r.PerSession, notes)
	}
	fmt.Fprintf(w, "\nper session: RSS (VmRSS), heap (go_memstats_heap_inuse_bytes), stack (go_memstats_stack_inuse_bytes),\n")
	fmt.Fprintf(w, "goroutines, fds, Redis used_memory. ok: sessions that initialized and answered their call.\n")
	fmt.Fprintf(w, "Targets (issue 20): RSS <= 26 KiB per session, local and redis; Redis <= 2048 B per session.\n")
	if o.Idle <= 0 || len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "\nafter %s idle (growth over the same baseline)\n", o.Idle)
	header()
	for _, r := range results {
		if r.IdlePerSession != nil {
			row(r, *r.IdlePerSession, fmt.Sprintf("%d/%d answered a tools/call afterwards", r.Answered, r.Sessions))
		}
	}
}
