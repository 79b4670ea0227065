package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// options are a measuring run's flags.
type options struct {
	duration, warmup time.Duration
	rounds           int
	sessions         []int
	variants         []variant
	profile          string
	redis            string // the limits variants' Redis URL
}

// parseSessions reads the -sessions list.
func parseSessions(s string) ([]int, error) {
	var ns []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad session count %q", f)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// leg is one path measured: an endpoint and the client that calls it.
type leg struct {
	name, url, middle, proc, tool, version string
	variant                                string // telemetry variant of the mux in the middle ("" for none)
	base                                   int    // index of the telemetry-off leg of the same era; -1: none
}

// fleet is the processes a run starts: the upstream, the reverse proxy, a
// mux per telemetry variant and, when one exports, the OTLP receiver; when
// one asks, the AuthZEN endpoint.
type fleet struct {
	up, rp, otlp, pdp *child
	proc              *child // the processor variant's external processor
	muxes             []*child
	variants          []variant
}

func startFleet(o options) (*fleet, error) {
	f := &fleet{variants: o.variants}
	if err := f.start(o); err != nil {
		f.stop()
		return nil, err
	}
	return f, nil
}

func (f *fleet) start(o options) (err error) {
	if f.up, err = startChild("-role", "upstream"); err != nil {
		return err
	}
	if f.rp, err = startChild("-role", "revproxy", "-upstream", f.upURL()); err != nil {
		return err
	}
	for _, v := range o.variants {
		if v.ratio > 0 && f.otlp == nil {
			if f.otlp, err = startChild("-role", "otlp"); err != nil {
				return err
			}
		}
		args := []string{"-role", "mux", "-upstream", f.upURL(), "-muxprofile", profileFor(o.profile, v)}
		if v.limits != "" {
			args = append(args, "-limits", v.limits, "-redis", o.redis)
		}
		if v.ratio > 0 {
			args = append(args, "-otlp", "http://"+f.otlp.addr+"/"+v.name, "-ratio", strconv.FormatFloat(v.ratio, 'g', -1, 64))
		}
		if v.guards != "" {
			args = append(args, "-guards", v.guards)
		}
		if v.policy != "" {
			block, err := f.policyBlock(v.policy)
			if err != nil {
				return err
			}
			args = append(args, "-policy", block)
		}
		mx, err := startChild(args...)
		if err != nil {
			return fmt.Errorf("mux%s: %w", v.suffix(), err)
		}
		f.muxes = append(f.muxes, mx)
	}
	return nil
}

// policyBlock is the policy block of a policy variant's mux: for
// "authzen", the endpoint's, started on first use.
func (f *fleet) policyBlock(kind string) (string, error) {
	if kind == "processor" {
		return f.processorBlock()
	}
	if kind == "cel" {
		return `{"rules": [{"name": "bench", "tool": "bench_echo", "condition": "args.text.size() > 100000 || args.text.startsWith('DROP ')", "effect": "deny"}]}`, nil
	}
	if f.pdp == nil {
		var err error
		if f.pdp, err = startChild("-role", "authzen"); err != nil {
			return "", fmt.Errorf("authzen endpoint: %w", err)
		}
	}
	return fmt.Sprintf(`{"authzen": {"url": "http://%s/access/v1/evaluation", "timeout_ms": 1000}}`, f.pdp.addr), nil
}

// processorBlock is the processor variant's processors list: one
// response-phase processor (a process of its own, started on first use)
// on every tool.
func (f *fleet) processorBlock() (string, error) {
	if f.proc == nil {
		var err error
		if f.proc, err = startChild("-role", "processor"); err != nil {
			return "", fmt.Errorf("processor: %w", err)
		}
	}
	return fmt.Sprintf(`[{"name": "bench", "url": "http://%s/process", "phase": "response", "timeout_ms": 1000}]`, f.proc.addr), nil
}

// profileFor names the CPU profile file of v's mux: file itself for off,
// file.<variant> for the others.
func profileFor(file string, v variant) string {
	if file == "" || v.suffix() == "" {
		return file
	}
	return file + "." + v.name
}

func (f *fleet) upURL() string { return "http://" + f.up.addr + "/mcp" }

// stop ends every process started, the muxes first (a mux flushes its
// spans as it closes).
func (f *fleet) stop() {
	f.stopMuxes()
	for _, c := range []*child{f.rp, f.otlp, f.pdp, f.proc, f.up} {
		if c != nil {
			c.stop()
		}
	}
}

func (f *fleet) stopMuxes() {
	for _, c := range f.muxes {
		c.stop()
	}
	f.muxes = nil
}

// procs maps the processes' names to their pids.
func (f *fleet) procs() map[string]int {
	m := map[string]int{"upstream": f.up.cmd.Process.Pid, "revproxy": f.rp.cmd.Process.Pid, "client": os.Getpid()}
	for i, v := range f.variants {
		m["mux"+v.suffix()] = f.muxes[i].cmd.Process.Pid
	}
	return m
}

// legs lists the paths measured: direct, through the reverse proxy, and
// through each variant's mux over both eras.
func (f *fleet) legs() []leg {
	ls := []leg{
		{name: "direct", url: f.upURL(), tool: "echo", version: "2025-11-25", base: -1},
		{name: "revproxy", url: "http://" + f.rp.addr + "/mcp", middle: f.rp.addr, proc: "revproxy", tool: "echo", version: "2025-11-25", base: -1},
	}
	off := map[string]int{}
	for i, v := range f.variants {
		mx := f.muxes[i]
		// The same mux over the sessionless 2026-07-28 leg.
		for _, era := range []struct{ name, version string }{{"mux", "2025-11-25"}, {"mux-2026", "2026-07-28"}} {
			l := leg{name: era.name + v.suffix(), url: "http://" + mx.addr + "/mcp", middle: mx.addr, proc: "mux" + v.suffix(),
				tool: "bench_echo", version: era.version, variant: v.name, base: -1}
			if v.name == "off" {
				off[era.version] = len(ls)
			}
			ls = append(ls, l)
		}
	}
	for i := range ls {
		if b, ok := off[ls[i].version]; ok && ls[i].variant != "" && ls[i].variant != "off" {
			ls[i].base = b
		}
	}
	return ls
}

func bench(o options) error {
	f, err := startFleet(o)
	if err != nil {
		return err
	}
	defer f.stop()
	fmt.Printf("mcpbench: echo tool, %s per path in %d alternating rounds after %s warm-up, %d CPUs\n",
		o.duration, o.rounds, o.warmup, numCPU())
	fmt.Printf("%-9s %-15s %9s %9s %10s %7s %15s %17s %15s %12s\n", "sessions", "path", "p50", "p99", "calls/s", "errors",
		"client cpu/call", "upstream cpu/call", "middle cpu/call", "allocs/call")
	legs := f.legs()
	sent := map[string]int{}
	for _, n := range o.sessions {
		results, err := measure(n, legs, f.procs(), o, sent)
		if err != nil {
			return err
		}
		report(n, legs, results)
	}
	return f.reportSpans(sent)
}

// measure drives every leg with n sessions and returns their results; it
// adds each variant's successful calls, warm-up included, to sent.
func measure(n int, legs []leg, procs map[string]int, o options, sent map[string]int) ([]result, error) {
	paths := make([]*path, 0, len(legs))
	defer func() {
		for _, p := range paths {
			p.close()
		}
	}()
	for _, l := range legs {
		p, err := openPath(l.url, l.middle, l.tool, n, l.version)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		p.proc = l.proc
		paths = append(paths, p)
	}
	for _, p := range paths {
		p.drive(o.warmup, false, procs)
	}
	// Alternate short rounds so that drift on a shared machine hits every path alike.
	before := middleCPU(paths, procs)
	for range o.rounds {
		for _, p := range paths {
			p.drive(o.duration/time.Duration(o.rounds), true, procs)
		}
	}
	settle(paths, procs, before)
	results := make([]result, len(paths))
	for i, p := range paths {
		var err error
		if results[i], err = p.result(); err != nil {
			return nil, fmt.Errorf("%s: %w", legs[i].name, err)
		}
		sent[legs[i].variant] += p.sent
	}
	return results, nil
}

// middleCPU returns the CPU time used so far by each process in the middle
// of a path.
func middleCPU(paths []*path, procs map[string]int) map[string]time.Duration {
	m := map[string]time.Duration{}
	for _, p := range paths {
		if p.proc != "" {
			m[p.proc] = cpuTime(procs[p.proc])
		}
	}
	return m
}

// settle gives each process in the middle the CPU time it used during the
// measuring rounds outside its own paths' turns — span batches the SDK
// exports after a turn ends, garbage collected late — shared among its
// paths by their calls: its CPU per call covers all its work.
func settle(paths []*path, procs map[string]int, before map[string]time.Duration) {
	for proc, t0 := range before {
		outside := cpuTime(procs[proc]) - t0
		calls := 0
		for _, p := range paths {
			if p.proc == proc {
				outside -= p.cpu[proc]
				calls += len(p.lat)
			}
		}
		if outside <= 0 || calls == 0 {
			continue
		}
		for _, p := range paths {
			if p.proc == proc {
				p.cpu[proc] += outside * time.Duration(len(p.lat)) / time.Duration(calls)
			}
		}
	}
}

// report prints the legs' rows and their ratios to direct (and, for a
// telemetry or limits variant, what it adds to the same era's mux with both off).
func report(n int, legs []leg, results []result) {
	const us = 100 * time.Nanosecond
	for i, l := range legs {
		r := results[i]
		mid, allocs := "-", "-"
		if l.proc != "" {
			mid = r.cpu[l.proc].Round(us).String()
			allocs = strconv.FormatFloat(r.allocs, 'f', 1, 64)
		}
		fmt.Printf("%-9d %-15s %9s %9s %10.0f %7d %15s %17s %15s %12s\n", n, l.name,
			r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond), r.rate, r.errors,
			r.cpu["client"].Round(us), r.cpu["upstream"].Round(us), mid, allocs)
	}
	direct := results[0]
	for i, l := range legs[1:] {
		r := results[i+1]
		line := fmt.Sprintf("%-15s at %d session(s): p50 %.2fx direct, p99 %.2fx direct, throughput %.2fx direct, cpu/call %.2fx upstream cpu/call",
			l.name, n, float64(r.p50)/float64(direct.p50), float64(r.p99)/float64(direct.p99), r.rate/direct.rate,
			float64(r.cpu[l.proc])/float64(r.cpu["upstream"]))
		if l.base >= 0 {
			b := results[l.base]
			line += fmt.Sprintf("; vs off: p50 %+.0f%%, mux cpu/call %+.1f µs", 100*(float64(r.p50)/float64(b.p50)-1),
				float64(r.cpu[l.proc]-b.cpu[legs[l.base].proc])/float64(time.Microsecond))
		}
		fmt.Println(line)
	}
}

// reportSpans stops the muxes, which flushes their spans, and prints what
// the OTLP receiver decoded from each exporting variant.
func (f *fleet) reportSpans(sent map[string]int) error {
	if f.otlp == nil {
		return nil
	}
	f.stopMuxes()
	spans, err := exportedSpans(f.otlp.addr)
	if err != nil {
		return fmt.Errorf("OTLP receiver: %w", err)
	}
	for _, v := range f.variants {
		if v.ratio == 0 {
			continue
		}
		fmt.Printf("telemetry %s (%g%% of new traces sampled): %d spans exported over OTLP/HTTP for %d tools/calls (warm-up included), %.3f per call\n",
			v.name, 100*v.ratio, spans[v.name], sent[v.name], float64(spans[v.name])/float64(max(sent[v.name], 1)))
	}
	return nil
}
