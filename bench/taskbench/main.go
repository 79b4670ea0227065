// Command taskbench measures the durable-task poller and its stores: with
// -tasks active tasks that are always due, it runs -replicas pollers (each a
// taskpoll.Service with max_concurrent_polls 64) on one Redis and reports
// polls per second, Redis round trips per poll (counted by a go-redis hook
// on every replica's client, and commands per poll from INFO commandstats)
// and Redis memory per task (INFO memory); then the same on the embedded
// bbolt store with one replica (file size per task).
//
// The status tool is answered in process (a fixed "running" snapshot), so
// the figures are the poller's and the store's, not an upstream's.
//
//	go run ./bench/taskbench [-tasks 10000] [-replicas 2] [-duration 10s]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/storeclient"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
)

func main() {
	tasks := flag.Int("tasks", 10000, "active tasks")
	replicas := flag.Int("replicas", 2, "pollers on Redis")
	duration := flag.Duration("duration", 10*time.Second, "measuring time per store")
	flag.Parse()
	if err := run(*tasks, *replicas, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "taskbench:", err)
		os.Exit(1)
	}
}

// running answers every status call: still running, poll again at once.
type running struct{ calls atomic.Int64 }

func (r *running) CallTool(_ context.Context, c taskpoll.Call) (json.RawMessage, error) {
	r.calls.Add(1)
	var a struct {
		TaskID string `json:"task_id"`
	}
	_ = json.Unmarshal(c.Args, &a)
	return json.RawMessage(`{"content":[],"structuredContent":{"task_id":"` + a.TaskID + `","status":"running"}}`), nil
}

// roundTrips counts what a client sends: one per command, one per pipeline.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}

func run(n, replicas int, d time.Duration) error {
	dir, err := os.MkdirTemp("", "taskbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fmt.Printf("taskbench: %d active tasks, always due; status answered in process; %s per store\n\n", n, d)

	addr, stop, err := startRedis(dir)
	if err != nil {
		return err
	}
	defer stop()
	url := "redis://" + addr
	seedClient, _ := storeclient.Dial(url)
	seed := taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: seedClient, KeyPrefix: "bench:"})
	before, _ := infoField(seedClient, "memory", "used_memory")
	if err := seedTasks(seed, n); err != nil {
		return err
	}
	after, _ := infoField(seedClient, "memory", "used_memory")
	_ = seedClient.ConfigResetStat(context.Background()).Err()

	var stores []taskpoll.Store
	var hooks []*roundTrips
	for range replicas {
		c, _ := storeclient.Dial(url)
		h := &roundTrips{}
		c.AddHook(h)
		hooks = append(hooks, h)
		stores = append(stores, taskpoll.NewRedisStore(taskpoll.RedisOptions{Client: c, KeyPrefix: "bench:"}))
	}
	polls, elapsed, err := measure(stores, d)
	if err != nil {
		return err
	}
	var trips int64
	for _, h := range hooks {
		trips += h.n.Load()
	}
	cmds, _ := commandCalls(seedClient)
	fmt.Printf("Redis (%d replicas, max_concurrent_polls 64 each)\n", replicas)
	fmt.Printf("  polls/s                  %.0f\n", float64(polls)/elapsed.Seconds())
	fmt.Printf("  round trips per poll     %.2f  (go-redis hook: commands + pipelines, all replicas)\n", float64(trips)/float64(polls))
	fmt.Printf("  Redis commands per poll  %.2f  (INFO commandstats: EVALSHA and the commands the scripts run)\n", float64(cmds)/float64(polls))
	fmt.Printf("  memory per task          %.0f bytes  (INFO memory used_memory, %d tasks)\n\n", float64(after-before)/float64(n), n)
	for _, s := range stores {
		_ = s.Close()
	}
	_ = seed.Close()

	bdir := filepath.Join(dir, "bolt")
	bs, err := taskpoll.OpenBoltStore(taskpoll.BoltOptions{Dir: bdir})
	if err != nil {
		return err
	}
	defer bs.Close()
	if err := seedTasks(bs, n); err != nil {
		return err
	}
	fi, _ := os.Stat(filepath.Join(bdir, "tasks.db"))
	polls, elapsed, err = measure([]taskpoll.Store{bs}, d)
	if err != nil {
		return err
	}
	fmt.Printf("Embedded bbolt (1 replica, max_concurrent_polls 64)\n")
	fmt.Printf("  polls/s                  %.0f\n", float64(polls)/elapsed.Seconds())
	fmt.Printf("  store size per task      %.0f bytes  (tasks.db after seeding %d tasks)\n", float64(fi.Size())/float64(n), n)
	return nil
}

// seedTasks creates n working tasks, due now.
func seedTasks(st taskpoll.Store, n int) error {
	ctx := context.Background()
	now := time.Now()
	for i := range n {
		t := &taskpoll.Task{ID: taskpoll.NewID(), User: fmt.Sprintf("user-%d", i%100), Thread: fmt.Sprintf("thread-%d", i%1000),
			Server: "jobs", Name: "report", StatusTool: "job_status", CancelTool: "cancel_job", RemoteID: fmt.Sprintf("job-%d", i),
			Status: taskpoll.StatusWorking, CreatedAt: now, UpdatedAt: now, NextPollAt: now}
		if err := st.Create(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// measure runs one Service per store for d and returns the polls made.
func measure(stores []taskpoll.Store, d time.Duration) (int64, time.Duration, error) {
	r := &running{}
	var svcs []*taskpoll.Service
	for i, st := range stores {
		s, err := taskpoll.New(taskpoll.Options{Store: st, Caller: r, Owner: fmt.Sprint("replica-", i),
			Config: taskpoll.Config{PollInterval: time.Millisecond, Lease: time.Minute, MaxConcurrentPolls: 64}})
		if err != nil {
			return 0, 0, err
		}
		svcs = append(svcs, s)
	}
	start := time.Now()
	for _, s := range svcs {
		s.Start()
	}
	time.Sleep(d)
	for _, s := range svcs {
		_ = s.Stop(context.Background())
	}
	return r.calls.Load(), time.Since(start), nil
}

func startRedis(dir string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir, "--save", "", "--appendonly", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives the benchmark
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting redis-server: %w", err)
	}
	stop := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for i := 0; ; i++ {
		if c.Ping(context.Background()).Err() == nil {
			return addr, stop, nil
		}
		if i > 200 {
			stop()
			return "", nil, fmt.Errorf("redis-server on %s did not answer", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func infoField(c redis.UniversalClient, section, field string) (int64, error) {
	s, err := c.Info(context.Background(), section).Result()
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO %s has no %s", section, field)
}

// commandCalls sums calls= over INFO commandstats, less INFO and CONFIG.
func commandCalls(c redis.UniversalClient) (int64, error) {
	s, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "cmdstat_") || strings.HasPrefix(line, "cmdstat_info") || strings.HasPrefix(line, "cmdstat_config") {
			continue
		}
		_, rest, _ := strings.Cut(line, "calls=")
		v, _, _ := strings.Cut(rest, ",")
		n, _ := strconv.ParseInt(v, 10, 64)
		total += n
	}
	return total, nil
}
