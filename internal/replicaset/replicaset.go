// Package replicaset runs mcp-mux as a multi-replica deployment does, for
// tests: a private redis-server, N `mcp-mux serve` processes sharing one
// config file (durable state in that Redis, one inbound.request_state_key),
// and HAProxy in front (or nginx), run with the README's example config,
// balancing every HTTP request round robin with no stickiness and
// health-checking /readyz on each replica's --ops-listen port, so a
// replica that is stopping leaves rotation. A test drives clients through
// URL and restarts, kills or reconfigures replicas underneath them.
//
// It is test support, not product code. The binary comes from Build (once,
// in TestMain); each process's stderr is kept and printed when the test
// fails. Set's methods return errors rather than failing the test, so they
// may be called from subtests and other goroutines; they are not meant to
// be called concurrently with each other.
package replicaset

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
)

// StateKey is the inbound.request_state_key every replica shares (a fixed
// test value: no secret).
const StateKey = "replicaset-test-request-state-key-7c1e9a4d20b3f658"

// Timeouts of the set's lifecycle steps.
const (
	startTimeout  = 60 * time.Second // a replica's start and first discovery
	stopTimeout   = 40 * time.Second // SIGTERM to exit: the delay plus the 20 s drain
	lbTimeout     = 15 * time.Second // haproxy seeing a replica up or down
	reloadTimeout = 30 * time.Second // every replica applying a written config
)

// Options configure a Set.
type Options struct {
	// Binary is the mcp-mux binary (see Build).
	Binary string
	// Replicas is how many `mcp-mux serve` processes run (at least 1).
	Replicas int
	// Config is the shared config file's JSON. store.redis_url (the set's
	// Redis) and inbound.request_state_key (StateKey) are added unless it
	// sets them.
	Config string
	// Env is added to each process's environment (the test's, without
	// MCP_MUX_* variables).
	Env []string
	// Args are added to each process's serve arguments (e.g.
	// "--log-level", "trace").
	Args []string
	// ShutdownDelay is each replica's --shutdown-delay: how long /readyz
	// answers 503 after SIGTERM before the listener closes. Zero means
	// one second, five health-check intervals; negative means none.
	ShutdownDelay time.Duration
	// Store is the Redis deployment the replicas share: "" (one
	// redis-server), "cluster" (a Redis Cluster of three masters) or
	// "sentinel" (a primary, a replica and three sentinels).
	Store string
	// CheckInterval is the balancer's health-check interval (HAProxy's
	// inter); zero means 200 ms. CheckFall is how many failed checks in a
	// row take a replica out of rotation (fall); zero means one.
	CheckInterval time.Duration
	CheckFall     int
	// Balancer is the load balancer in front: HAProxy (the default) or
	// Nginx, each run with the README's example config.
	Balancer Balancer
	// StickySessions makes the balancer send a session's requests to the
	// replica that created it (by Mcp-Session-Id), as deployments must
	// while sessions live in one replica's memory. For comparison only:
	// the point of the set is that any replica serves any request.
	StickySessions bool
}

// Balancer names the load balancer of a Set.
type Balancer int

// The balancers a Set can run.
const (
	HAProxy Balancer = iota // active /readyz checks on the ops port; a stats page
	Nginx                   // open-source nginx: passive checks only, no stats
)

// frontend is the running balancer.
type frontend interface {
	// url is the MCP endpoint's base, http://host:port.
	url() string
	// stats returns the backend's servers (HAProxy only).
	stats() (map[string]serverStat, error)
	// waitStatus waits until server sv's status starts with want; a
	// balancer without active checks returns at once.
	waitStatus(ctx context.Context, sv, want string) error
	// output is the balancer's stderr and stdout.
	output() string
	stop()
}

// Set is a running replica set.
type Set struct {
	opts     Options
	dir      string
	cfgPath  string
	redis    *mcptest.Redis         // Store ""
	cluster  *mcptest.RedisCluster  // Store "cluster"
	sentinel *mcptest.RedisSentinel // Store "sentinel"
	lb       frontend
	replicas []*Replica
	// cfgMu orders config writes against replicas starting and stopping:
	// a replica reloads a written config only while it runs, so a write
	// waits for a restart to end.
	cfgMu sync.Mutex
}

// Start starts Redis, the replicas and the balancer, and waits until
// every replica has finished its first discovery and is in rotation. It
// stops them all when the test ends (printing their logs if it failed).
func Start(t testing.TB, opts Options) *Set {
	t.Helper()
	if opts.Replicas < 1 {
		opts.Replicas = 1
	}
	if opts.ShutdownDelay == 0 {
		opts.ShutdownDelay = time.Second
	}
	if opts.CheckInterval == 0 {
		opts.CheckInterval = 200 * time.Millisecond
	}
	if opts.CheckFall == 0 {
		opts.CheckFall = 1
	}
	s := &Set{opts: opts, dir: t.TempDir()}
	switch opts.Store {
	case "cluster":
		s.cluster = mcptest.StartRedisCluster(t, 3)
	case "sentinel":
		s.sentinel = mcptest.StartRedisSentinel(t)
	default:
		s.redis = mcptest.StartRedis(t, false)
	}
	s.cfgPath = filepath.Join(s.dir, "config.json")
	if err := s.writeConfig(opts.Config); err != nil {
		t.Fatal(err)
	}
	addrs, err := freeAddrs(2 * opts.Replicas)
	if err != nil {
		t.Fatal(err)
	}
	servers := make([]lbServer, opts.Replicas)
	for i := range servers {
		r := &Replica{index: i, addr: addrs[2*i], opsAddr: addrs[2*i+1]}
		s.replicas = append(s.replicas, r)
		_, opsPort, _ := net.SplitHostPort(r.opsAddr)
		servers[i] = lbServer{Name: "r" + strconv.Itoa(i), Addr: r.addr, OpsPort: opsPort}
	}
	t.Cleanup(func() { s.close(t) })
	errs := make([]error, len(s.replicas))
	var wg sync.WaitGroup
	for i, r := range s.replicas {
		wg.Go(func() { errs[i] = r.start(opts.Binary, s.args(i), s.env(), startTimeout) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	switch opts.Balancer {
	case Nginx:
		s.lb, err = startNginx(s.dir, servers)
	default:
		s.lb, err = startBalancer(s.dir, servers, healthCheck{opts.CheckInterval, opts.CheckFall}, opts.StickySessions)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i := range s.replicas {
		if err := s.waitLB(i, "UP"); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// URL returns the balancer's /mcp URL.
func (s *Set) URL() string { return s.lb.url() + "/mcp" }

// Replica returns replica i.
func (s *Set) Replica(i int) *Replica { return s.replicas[i] }

// Len returns the number of replicas.
func (s *Set) Len() int { return len(s.replicas) }

// Redis returns the set's redis-server (Store "").
func (s *Set) Redis() *mcptest.Redis { return s.redis }

// Cluster returns the set's Redis Cluster (Store "cluster").
func (s *Set) Cluster() *mcptest.RedisCluster { return s.cluster }

// Sentinel returns the set's Sentinel deployment (Store "sentinel").
func (s *Set) Sentinel() *mcptest.RedisSentinel { return s.sentinel }

// store returns the store block's redis_url and redis_mode for the set.
func (s *Set) store() (url, mode string) {
	switch {
	case s.cluster != nil:
		return s.cluster.URL(), "cluster"
	case s.sentinel != nil:
		return s.sentinel.URL(), "sentinel"
	}
	return s.redis.URL(), "standalone"
}

// Logs returns replica i's stderr, every run of it.
func (s *Set) Logs(i int) string { return s.replicas[i].Logs() }

// Spread returns how many HTTP requests the balancer sent to each replica
// so far (health checks not counted).
func (s *Set) Spread() ([]int, error) {
	st, err := s.lb.stats()
	if err != nil {
		return nil, err
	}
	out := make([]int, len(s.replicas))
	for i := range out {
		out[i] = st["r"+strconv.Itoa(i)].requests
	}
	return out, nil
}

// CheckFailures returns, per replica, the balancer's failed health checks
// and how many times a failed check took the replica out of rotation so
// far (HAProxy's chkfail and chkdown).
func (s *Set) CheckFailures() (fails, downs []int, err error) {
	st, err := s.lb.stats()
	if err != nil {
		return nil, nil, err
	}
	fails, downs = make([]int, len(s.replicas)), make([]int, len(s.replicas))
	for i := range s.replicas {
		sv := st["r"+strconv.Itoa(i)]
		fails[i], downs[i] = sv.checkFails, sv.checkDowns
	}
	return fails, downs, nil
}

// InFlight returns how many requests each replica is serving now (as the
// balancer counts them: open server connections, streams included).
func (s *Set) InFlight() ([]int, error) {
	st, err := s.lb.stats()
	if err != nil {
		return nil, err
	}
	out := make([]int, len(s.replicas))
	for i := range out {
		out[i] = st["r"+strconv.Itoa(i)].current
	}
	return out, nil
}

// Stop sends replica i SIGTERM and waits until it has exited (code 0) and
// the balancer has taken it out of rotation.
func (s *Set) Stop(i int) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	return s.stop(i)
}

// stop is Stop with s.cfgMu held: a replica that is stopping reloads no
// config (it drains), so WriteConfig waits until it is down or up again.
func (s *Set) stop(i int) error {
	code, err := s.replicas[i].signal(syscall.SIGTERM, stopTimeout)
	if err != nil {
		return err
	}
	if code != 0 {
		return fmt.Errorf("replica %d exited with code %d after SIGTERM", i, code)
	}
	return s.waitLB(i, "DOWN")
}

// Kill sends replica i SIGKILL and waits until it is gone and the balancer
// has taken it out of rotation.
func (s *Set) Kill(i int) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if _, err := s.replicas[i].signal(syscall.SIGKILL, stopTimeout); err != nil {
		return err
	}
	return s.waitLB(i, "DOWN")
}

// Start starts replica i again on its address and waits until it has
// finished its first discovery and the balancer has it in rotation.
func (s *Set) Start(i int) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	return s.start(i)
}

// start is Start with s.cfgMu held: a replica that is starting reads the
// config it finds, so WriteConfig waits until it is up.
func (s *Set) start(i int) error {
	if err := s.replicas[i].start(s.opts.Binary, s.args(i), s.env(), startTimeout); err != nil {
		return err
	}
	return s.waitLB(i, "UP")
}

// Restart stops replica i (SIGTERM) and starts it again on the same
// address.
func (s *Set) Restart(i int) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	if err := s.stop(i); err != nil {
		return err
	}
	return s.start(i)
}

// RollingRestart restarts every replica in turn, as a rolling deployment
// does, stopping early when ctx is done.
func (s *Set) RollingRestart(ctx context.Context) error {
	for i := range s.replicas {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := s.Restart(i); err != nil {
			return fmt.Errorf("rolling restart: %w", err)
		}
	}
	return nil
}

// WriteConfig replaces the shared config file atomically (a rename, as
// the kubelet's ConfigMap update does) and waits until every running
// replica has applied it; a replica that reports a problem with it is an
// error. cfg is completed as Options.Config is; writing the running
// config again changes nothing.
func (s *Set) WriteConfig(cfg string) error {
	s.cfgMu.Lock()
	defer s.cfgMu.Unlock()
	b, err := completeConfig(cfg, s.store)
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(s.cfgPath); err == nil && bytes.Equal(old, b) {
		return nil // the replicas ignore a rewrite that changes nothing
	}
	type mark struct {
		index, reloaded, problems int
		p                         *proc
	}
	var running []mark
	for _, r := range s.replicas {
		if r.Running() {
			p := r.current()
			out := p.logs.String()
			running = append(running, mark{r.index, len(mcptest.FindLogs(out, msgReloaded)), len(mcptest.FindLogs(out, msgReloadProblem)), p})
		}
	}
	if err := writeAtomic(s.cfgPath, b); err != nil {
		return err
	}
	for _, m := range running {
		var problems []map[string]any
		ok := m.p.logs.WaitFor(reloadTimeout, m.p.done, func(out string) bool {
			problems = mcptest.FindLogs(out, msgReloadProblem)[m.problems:]
			return len(mcptest.FindLogs(out, msgReloaded)) > m.reloaded || len(problems) > 0
		})
		switch {
		case len(problems) > 0:
			return fmt.Errorf("replica %d: reload problem: %v", m.index, problems[0]["problem"])
		case !ok:
			return fmt.Errorf("replica %d did not reload within %s", m.index, reloadTimeout)
		}
	}
	return nil
}

// The log messages of a reload: one per applied reload, one per problem.
const (
	msgReloaded      = "config reloaded"
	msgReloadProblem = "reload problem"
)

// writeConfig completes cfg and writes it to the config path.
func (s *Set) writeConfig(cfg string) error {
	b, err := completeConfig(cfg, s.store)
	if err != nil {
		return err
	}
	return writeAtomic(s.cfgPath, b)
}

// writeAtomic replaces path with b through a rename.
func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing config: %w", err)
	}
	return nil
}

// completeConfig adds store.redis_url, store.redis_mode (from store) and
// inbound.request_state_key to the JSON config cfg unless it sets them.
// Top-level values other than store and inbound are kept byte for byte
// (mcpServers' order matters).
func completeConfig(cfg string, store func() (url, mode string)) ([]byte, error) {
	redisURL, mode := store()
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(cfg), &doc); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if doc == nil {
		doc = map[string]json.RawMessage{}
	}
	for _, f := range []struct{ block, key, value string }{
		{"store", "redis_url", redisURL},
		{"store", "redis_mode", mode},
		{"inbound", "request_state_key", StateKey},
	} {
		block := map[string]any{}
		if raw, ok := doc[f.block]; ok {
			if err := json.Unmarshal(raw, &block); err != nil {
				return nil, fmt.Errorf("config %s: %w", f.block, err)
			}
		}
		if _, ok := block[f.key]; !ok {
			block[f.key] = f.value
		}
		b, err := json.Marshal(block)
		if err != nil {
			return nil, err
		}
		doc[f.block] = b
	}
	return json.MarshalIndent(doc, "", "  ")
}

// args are replica i's serve arguments.
func (s *Set) args(i int) []string {
	delay := s.opts.ShutdownDelay
	if delay < 0 {
		delay = 0
	}
	args := []string{"serve", "--config", s.cfgPath, "--listen", s.replicas[i].addr, "--ops-listen", s.replicas[i].opsAddr,
		"--log-format", "json", "--shutdown-delay", delay.String()}
	return append(args, s.opts.Args...)
}

func (s *Set) env() []string { return append(mcptest.BaseEnv(), s.opts.Env...) }

// waitLB waits until the balancer reports replica i's status as want.
func (s *Set) waitLB(i int, want string) error {
	if s.lb == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lbTimeout)
	defer cancel()
	return s.lb.waitStatus(ctx, "r"+strconv.Itoa(i), want)
}

// close stops every replica (SIGTERM, all at once; SIGKILL for those that
// hang) and the balancer, and logs everything when t failed. A replica
// must exit 0 on SIGTERM.
func (s *Set) close(t testing.TB) {
	var wg sync.WaitGroup
	errs := make([]error, len(s.replicas))
	for i, r := range s.replicas {
		if !r.Running() {
			continue
		}
		wg.Go(func() {
			code, err := r.signal(syscall.SIGTERM, stopTimeout)
			switch {
			case err != nil:
				errs[i] = err
				_, _ = r.signal(syscall.SIGKILL, stopTimeout)
			case code != 0:
				errs[i] = fmt.Errorf("replica %d exited with code %d after SIGTERM", i, code)
			}
		})
	}
	wg.Wait()
	if s.lb != nil {
		s.lb.stop()
	}
	if err := errors.Join(errs...); err != nil {
		t.Errorf("stopping the replicas: %v", err)
	}
	if t.Failed() {
		for _, r := range s.replicas {
			t.Logf("replica %d (%s) log:\n%s", r.index, r.addr, r.Logs())
		}
		if s.lb != nil {
			t.Logf("balancer output:\n%s", s.lb.output())
		}
	}
}
