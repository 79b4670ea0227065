package replicaset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/replicaset"
)

// The Redis outage of TestRedisOutageTakesNothingDown: hung (SIGSTOP: every
// round trip waits for its timeout) for the first half, gone (killed:
// connections refused) for the second.
const (
	outageHung = 15 * time.Second
	outageGone = 15 * time.Second
)

// TestRedisOutageTakesNothingDown (issue 34): two replicas behind HAProxy
// with the docs' config, checked every 500 ms with a 500 ms check
// timeout and taken out on the first failed check, sharing sessions,
// durable tasks and limits through a Redis that is out for 30 s while
// clients call 2026-07-28 tools through the balancer. No check fails (so no
// replica leaves rotation), every call succeeds, each replica's /readyz,
// sampled every 50 ms on its ops port, answers 200 with p99 under 50 ms,
// and a new 2025-11-25 session is refused with 503 and Retry-After (no
// Redis address in the answer) until Redis is back, then opened.
func TestRedisOutageTakesNothingDown(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("up"))
	jobs := mcptest.ServeHTTP(t, (&mcptest.TaskServer{PollsToComplete: 1}).MCP())
	cfg := fmt.Sprintf(`{
  "mcpServers": {"up": {"type": "http", "url": %q}, "jobs": %s},
  "mcp_tasks": {"enabled": true},
  "limits": {"rules": [{"name": "all", "scope": "caller", "calls": 100000, "per_seconds": 60}]}
}`, up.URL+"/mcp", mcptest.TaskServerJSON(jobs.URL+"/mcp", ""))
	set := replicaset.Start(t, replicaset.Options{Binary: muxBin, Replicas: 2, Config: cfg,
		CheckInterval: 500 * time.Millisecond, CheckFall: 1})
	rds := set.Redis()
	defer rds.Resume() // a paused server would hang the replicas' shutdown

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()

	// Clients calling through the balancer for the whole test.
	var calls, failed atomic.Int64
	var errMu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				text := fmt.Sprintf("w%d-%d", w, i)
				err := modernEcho(ctx, client, set.URL(), "up_echo", text)
				if ctx.Err() != nil {
					return
				}
				calls.Add(1)
				if err != nil {
					failed.Add(1)
					errMu.Lock()
					if len(errs) < 10 {
						errs = append(errs, err.Error())
					}
					errMu.Unlock()
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}

	// /readyz of each replica on its ops port, as HAProxy checks it.
	var outage atomic.Bool
	samplers := make([]*readyzSampler, set.Len())
	for i := range samplers {
		samplers[i] = &readyzSampler{url: set.Replica(i).ReadyzURL()}
		wg.Go(func() { samplers[i].run(ctx, &outage) })
	}

	if err := initialize(client, set.URL(), http.StatusOK, nil); err != nil {
		t.Fatalf("before the outage: %v", err)
	}
	time.Sleep(time.Second)
	fails0, downs0, err := set.CheckFailures()
	if err != nil {
		t.Fatal(err)
	}
	calls0, failed0 := calls.Load(), failed.Load()

	outage.Store(true)
	rds.Pause()
	start := time.Now()
	if err := initialize(client, set.URL(), http.StatusServiceUnavailable, t.Logf); err != nil {
		t.Errorf("Redis hung: %v", err)
	}
	time.Sleep(time.Until(start.Add(outageHung)))
	rds.Resume()
	rds.Stop()
	if err := initialize(client, set.URL(), http.StatusServiceUnavailable, t.Logf); err != nil {
		t.Errorf("Redis gone: %v", err)
	}
	time.Sleep(time.Until(start.Add(outageHung + outageGone)))
	fails1, downs1, err := set.CheckFailures()
	if err != nil {
		t.Fatal(err)
	}
	outage.Store(false)
	callsOut, failedOut := calls.Load()-calls0, failed.Load()-failed0
	rds.Start()

	// Back: a new session opens again (the replicas reconnect on their own).
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := initialize(client, set.URL(), http.StatusOK, nil)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("Redis back for 15 s: %v", err)
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()

	t.Logf("during the %s outage: %d calls through HAProxy, %d failed; in all %d calls, %d failed; errors: %q",
		outageHung+outageGone, callsOut, failedOut, calls.Load(), failed.Load(), errs)
	if callsOut < 100 {
		t.Errorf("only %d calls during the outage", callsOut)
	}
	if n := failed.Load(); n > 0 {
		t.Errorf("%d calls failed through the balancer", n)
	}
	for i := range set.Len() {
		if d := fails1[i] - fails0[i]; d > 0 || downs1[i] > downs0[i] {
			t.Errorf("replica %d: %d failed health checks, %d times marked down during the outage", i, d, downs1[i]-downs0[i])
		}
	}
	t.Logf("HAProxy health checks failed during the outage: %v, replicas marked down: %v",
		diff(fails1, fails0), diff(downs1, downs0))
	for i, s := range samplers {
		s.check(t, i)
	}
}

// modernEcho calls the echo tool with text as a 2026-07-28 request (no
// session) and checks the answer.
func modernEcho(ctx context.Context, c *http.Client, url, tool, text string) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` +
		`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"outage","version":"1"},` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"` + tool + `","arguments":{"text":"` + text + `"}}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("call %s: %w", text, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("call %s: reading the answer: %w", text, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("call %s: HTTP %d %s", text, resp.StatusCode, b)
	}
	var out struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Result == nil || out.Result.IsError ||
		len(out.Result.Content) == 0 || out.Result.Content[0].Text != text {
		return fmt.Errorf("call %s: answer %s", text, b)
	}
	return nil
}

// initialize opens a 2025-11-25 session through url and checks the status
// it gets: 200, or 503 with a Retry-After of whole seconds and a JSON-RPC
// error that names no Redis address (logged to logf).
func initialize(c *http.Client, url string, want int, logf func(string, ...any)) error {
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"outage","version":"1"}}}`
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	took := time.Since(start).Round(time.Millisecond)
	if resp.StatusCode != want {
		return fmt.Errorf("initialize: HTTP %d %s after %s, want %d", resp.StatusCode, b, took, want)
	}
	if want == http.StatusOK {
		if resp.Header.Get("Mcp-Session-Id") == "" {
			return fmt.Errorf("initialize: no Mcp-Session-Id: %s", b)
		}
		return nil
	}
	ra := resp.Header.Get("Retry-After")
	if ra == "" || strings.Trim(ra, "0123456789") != "" {
		return fmt.Errorf("initialize: Retry-After %q, want whole seconds", ra)
	}
	var e struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		return fmt.Errorf("initialize: HTTP %d body %q is no JSON-RPC error", resp.StatusCode, b)
	}
	for _, leak := range []string{"redis://", "127.0.0.1", "6379", "dial", "i/o timeout"} {
		if strings.Contains(string(b), leak) {
			return fmt.Errorf("initialize: the refusal carries %q: %s", leak, b)
		}
	}
	if logf != nil {
		logf("initialize refused after %s: HTTP %d, Retry-After %s, %s", took, resp.StatusCode, ra, bytes.TrimSpace(b))
	}
	return nil
}

// readyzSampler asks one replica's /readyz every 50 ms, recording the
// latency of each answer given while outage is set.
type readyzSampler struct {
	url string

	mu      sync.Mutex
	lat     []time.Duration
	refused []string // answers other than 200 ready, and errors
}

func (s *readyzSampler) run(ctx context.Context, outage *atomic.Bool) {
	// A new connection per check, as HAProxy's; longer than its 500 ms
	// check timeout, so that a slow answer is measured rather than lost.
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		during := outage.Load()
		start := time.Now()
		problem := ""
		resp, err := c.Get(s.url)
		if err != nil {
			problem = err.Error()
		} else {
			var st struct {
				Ready bool `json:"ready"`
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &st) != nil || !st.Ready {
				problem = fmt.Sprintf("HTTP %d %s", resp.StatusCode, b)
			}
		}
		took := time.Since(start)
		if !during || ctx.Err() != nil {
			continue
		}
		s.mu.Lock()
		s.lat = append(s.lat, took)
		if problem != "" {
			s.refused = append(s.refused, problem)
		}
		s.mu.Unlock()
	}
}

// check fails the test unless every sample during the outage was ready
// and their p99 is under 50 ms.
func (s *readyzSampler) check(t *testing.T, i int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lat) < 100 {
		t.Errorf("replica %d: only %d /readyz samples during the outage", i, len(s.lat))
		return
	}
	lat := slices.Clone(s.lat)
	slices.Sort(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(len(lat)-1))] }
	p99 := p(0.99)
	t.Logf("replica %d /readyz during the outage: %d samples, p50 %s, p99 %s, max %s, not ready %d",
		i, len(lat), p(0.5), p99, lat[len(lat)-1], len(s.refused))
	if p99 >= 50*time.Millisecond {
		t.Errorf("replica %d: /readyz p99 %s during the outage, want < 50ms", i, p99)
	}
	if len(s.refused) > 0 {
		t.Errorf("replica %d: /readyz not ready %d times during the outage, first: %s", i, len(s.refused), s.refused[0])
	}
}

func diff(a, b []int) []int {
	out := make([]int, len(a))
	for i := range a {
		out[i] = a[i] - b[i]
	}
	return out
}
