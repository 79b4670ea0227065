package replicaset

import (
	"context"
	_ "embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// HAProxyBin is where Debian's haproxy package installs the binary.
const HAProxyBin = "/usr/sbin/haproxy"

// backendName is the HAProxy backend of the replicas; server i is "r<i>".
const backendName = "mux"

// haproxyTemplate is the HAProxy example of docs/replicas-and-kubernetes.md
// ("Load balancers"), placeholders and all; TestDocsLoadBalancers holds the two
// equal.
//
//go:embed haproxy.cfg.tmpl
var haproxyTemplate string

// balancer is HAProxy in front of the replicas: roundrobin per HTTP
// request, no stickiness, /readyz health checks on each replica's ops
// port, and a CSV stats page.
type balancer struct {
	addr, statsAddr string
	cmd             *exec.Cmd
	stderr          *mcptest.LogWaiter
	done            chan struct{}
	http            *http.Client
}

// lbServer is one replica in a balancer's config.
type lbServer struct {
	Name    string // r<i>
	Addr    string // host:port of --listen
	OpsPort string // port of --ops-listen (same host)
}

// haproxyParams fill haproxyTemplate's placeholders.
type haproxyParams struct {
	Bind, Stats string // the frontend's and the stats page's addresses
	Inter       string // health-check interval, e.g. "500ms"
	Fall, Rise  int    // failed (passed) checks that take a server out (back)
	Servers     []lbServer
}

// renderHAProxy renders haproxyTemplate with p.
func renderHAProxy(p haproxyParams) (string, error) {
	return render("haproxy.cfg.tmpl", haproxyTemplate, p)
}

// render executes the text/template src with data.
func render(name, src string, data any) (string, error) {
	tmpl, err := template.New(name).Option("missingkey=error").Parse(src)
	if err != nil {
		return "", fmt.Errorf("parsing %s: %w", name, err)
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("rendering %s: %w", name, err)
	}
	return b.String(), nil
}

// haproxyConfig renders the balancer's config (the docs', see
// haproxyTemplate) for servers.
//
// Each request is balanced on its own (http-server-close and http-reuse
// never on the backend: a new server connection per request, none shared),
// so consecutive requests of one MCP session land on different replicas.
// Streams (SSE GETs, streamed POST responses) may stay open for the
// timeouts. A replica whose /readyz fails fall times (it answers 503 from
// SIGTERM on) leaves rotation; a request whose connection is refused (it
// never reached a replica) is redispatched to another, as most production
// balancers do.
//
// With sticky, a session's requests go to the replica that answered its
// initialize (matched on Mcp-Session-Id), as a deployment whose sessions
// live in one replica's memory needs; these lines follow the servers.
func haproxyConfig(addr, statsAddr string, servers []lbServer, chk healthCheck, sticky bool) (string, error) {
	cfg, err := renderHAProxy(haproxyParams{Bind: addr, Stats: statsAddr,
		Inter: chk.interval.String(), Fall: chk.fall, Rise: 1, Servers: servers})
	if err != nil {
		return "", err
	}
	if sticky {
		cfg += `    stick-table type string len 128 size 100k expire 30m
    stick match req.hdr(mcp-session-id)
    stick store-response res.hdr(mcp-session-id)
`
	}
	return cfg, nil
}

// healthCheck is the balancer's check of each replica's /readyz.
type healthCheck struct {
	interval time.Duration
	fall     int
}

// startBalancer writes the config into dir and runs haproxy in the
// foreground until stop.
func startBalancer(dir string, servers []lbServer, chk healthCheck, sticky bool) (*balancer, error) {
	ports, err := freeAddrs(2)
	if err != nil {
		return nil, err
	}
	lb := &balancer{addr: ports[0], statsAddr: ports[1], stderr: mcptest.NewLogWaiter(), done: make(chan struct{}),
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}}
	text, err := haproxyConfig(lb.addr, lb.statsAddr, servers, chk, sticky)
	if err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return nil, err
	}
	lb.cmd = exec.Command(HAProxyBin, "-db", "-f", cfg)
	lb.cmd.Stdout, lb.cmd.Stderr = lb.stderr, lb.stderr
	// A test binary killed by its timeout takes the balancer with it.
	lb.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := lb.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (Debian package haproxy): %w", HAProxyBin, err)
	}
	go func() { _ = lb.cmd.Wait(); close(lb.done) }()
	return lb, nil
}

func (lb *balancer) url() string    { return "http://" + lb.addr }
func (lb *balancer) output() string { return lb.stderr.String() }

// stop kills haproxy and waits for it to exit.
func (lb *balancer) stop() {
	_ = lb.cmd.Process.Kill()
	<-lb.done
}

// serverStat is one replica's line of the stats page.
type serverStat struct {
	status     string // UP, DOWN, MAINT, … (with a transition suffix)
	requests   int    // HTTP requests served
	current    int    // connections open now: requests in flight, streams
	checkFails int    // failed health checks (chkfail)
	checkDowns int    // UP to DOWN transitions (chkdown)
}

// stats reads the backend's servers from the CSV stats page.
func (lb *balancer) stats() (map[string]serverStat, error) {
	resp, err := lb.http.Get("http://" + lb.statsAddr + "/haproxy-stats;csv")
	if err != nil {
		return nil, fmt.Errorf("reading haproxy stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading haproxy stats: HTTP %d", resp.StatusCode)
	}
	return parseStats(resp.Body)
}

// parseStats reads the CSV stats of the backend's servers: "# pxname,
// svname, …" then one row per proxy and server. Requests are req_tot
// (HTTP requests), or stot (connections: one per request here) when an
// older haproxy leaves req_tot empty for servers.
func parseStats(r io.Reader) (map[string]serverStat, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parsing haproxy stats: %w", err)
	}
	if len(rows) == 0 {
		return nil, errors.New("parsing haproxy stats: empty")
	}
	col := map[string]int{}
	for i, name := range rows[0] {
		col[strings.TrimPrefix(name, "# ")] = i
	}
	field := func(row []string, name string) string {
		if i, ok := col[name]; ok && i < len(row) {
			return row[i]
		}
		return ""
	}
	out := map[string]serverStat{}
	for _, row := range rows[1:] {
		sv := field(row, "svname")
		if field(row, "pxname") != backendName || sv == "BACKEND" || sv == "FRONTEND" {
			continue
		}
		n, err := strconv.Atoi(field(row, "req_tot"))
		if err != nil {
			n, _ = strconv.Atoi(field(row, "stot"))
		}
		cur, _ := strconv.Atoi(field(row, "scur"))
		fails, _ := strconv.Atoi(field(row, "chkfail"))
		downs, _ := strconv.Atoi(field(row, "chkdown"))
		out[sv] = serverStat{status: field(row, "status"), requests: n, current: cur, checkFails: fails, checkDowns: downs}
	}
	return out, nil
}

// waitStatus waits until haproxy reports server sv with a status starting
// with want ("UP" or "DOWN").
func (lb *balancer) waitStatus(ctx context.Context, sv, want string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		st, err := lb.stats()
		if err == nil {
			last = st[sv].status
			if strings.HasPrefix(last, want) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("haproxy server %s is %q, not %s: %w (last stats error: %v)", sv, last, want, ctx.Err(), err)
		case <-lb.done:
			return fmt.Errorf("haproxy exited; its output:\n%s", lb.stderr.String())
		case <-tick.C:
		}
	}
}

// freeAddrs returns n loopback addresses whose ports were free a moment
// ago (listeners opened together, so the n are distinct, then closed).
func freeAddrs(n int) ([]string, error) {
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// waitListening waits until addr accepts a connection, done closes (the
// process exited) or timeout passes.
func waitListening(addr string, done <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		select {
		case <-done:
			return errors.New("exited before listening")
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s within %s: %w", addr, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
