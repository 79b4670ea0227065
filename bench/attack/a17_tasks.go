package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Issue 17, attack 10: one caller submits 5,000 durable tasks. Before, every
// one was accepted, kept and polled forever; now at most
// mcp_tasks.max_active_tasks_per_user are active at once, and finished
// records are removed after mcp_tasks.retention_seconds.

// jobs is a task server: submit_job starts job-N, job_status answers
// running until done is set, then completed.
type jobs struct {
	submits, polls atomic.Int64
	done           atomic.Bool
}

func (j *jobs) script(_ context.Context, method string, params json.RawMessage) json.RawMessage {
	switch method {
	case "tools/list":
		return json.RawMessage(`{"tools":[{"name":"submit_job","inputSchema":{"type":"object"}},{"name":"job_status","inputSchema":{"type":"object"}},{"name":"cancel_job","inputSchema":{"type":"object"}}]}`)
	case "tools/call":
		var p struct {
			Name string `json:"name"`
			Args struct {
				TaskID string `json:"task_id"`
			} `json:"arguments"`
		}
		_ = json.Unmarshal(params, &p)
		st, id := "running", p.Args.TaskID
		switch p.Name {
		case "submit_job":
			id = fmt.Sprintf("job-%d", j.submits.Add(1))
		case "job_status":
			j.polls.Add(1)
			if j.done.Load() {
				st = "completed"
			}
		case "cancel_job":
			st = "cancelled"
		}
		return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"%s"}],"structuredContent":{"task_id":%q,"status":%q}}`, st, id, st))
	}
	return json.RawMessage(`{}`)
}

// submitAs sends a 2026-07-28 (sessionless) submit as user and reports
// whether it became a task.
func (m *mux) submitAs(user string) (bool, error) {
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"attack","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},` +
		`"name":"jobs_submit_job","arguments":{}}}`
	req, _ := http.NewRequest(http.MethodPost, m.base+"/mcp", strings.NewReader(body))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "jobs_submit_job", "X-Mux-User": user} {
		req.Header.Set(k, v)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	return strings.Contains(string(b), `\"submitted\"`) || strings.Contains(string(b), `"resultType":"task"`), nil
}

var taskGauge = regexp.MustCompile(`(?m)^mcp_mux_tasks\{status="([a-z_]+)"\} (\d+)`)

// taskCounts reads mcp_mux_tasks{status} from /metrics: active and
// terminal records.
func (m *mux) taskCounts() (active, terminal int) {
	resp, err := m.client.Get(m.base + "/metrics")
	if err != nil {
		return -1, -1
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, g := range taskGauge.FindAllStringSubmatch(string(b), -1) {
		n, _ := strconv.Atoi(g[2])
		switch g[1] {
		case "completed", "failed", "cancelled":
			terminal += n
		default:
			active += n
		}
	}
	return active, terminal
}

func attackTasks(bin, dir string) error {
	j := &jobs{}
	up := serve(j.script)
	defer up.Close()
	if err := os.Setenv("MCP_MUX_DATA_DIR", dir); err != nil {
		return err
	}
	defer os.Unsetenv("MCP_MUX_DATA_DIR")
	cfg := func(limits string) string {
		return fmt.Sprintf(`{"mcpServers": {"jobs": {"type": "http", "url": %q, "task_toolsets": [{"name": "job", "submit_tool": "submit_job",
			"status_tool": "job_status", "cancel_tool": "cancel_job"}]}},
			"mcp_tasks": {"enabled": true, "poll_interval_seconds": 1%s}, "inbound": {"auth": {"mode": "trusted_header"}}}`, up.URL+"/mcp", limits)
	}
	m, err := startMux(bin, dir, cfg(`, "max_active_tasks_per_user": 100, "retention_seconds": 2`))
	note := "cap 100, retention 2s"
	if err != nil { // a build without the keys refuses them
		note = "build without the cap and retention keys"
		m, err = startMux(bin, dir, cfg(""))
	}
	if err != nil {
		return err
	}
	defer func() {
		if m.alive() {
			m.stop()
		}
	}()
	before := m.stats()

	// 5,000 submits from alice, 16 at a time, bounded to 40 s.
	start := time.Now()
	var accepted, refused, failed atomic.Int64
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for next.Add(1) <= 5000 && time.Since(start) < 40*time.Second {
				switch ok, err := m.submitAs("alice"); {
				case err != nil:
					failed.Add(1)
				case ok:
					accepted.Add(1)
				default:
					refused.Add(1)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	bobStart := time.Now()
	bobOK, bobErr := m.submitAs("bob")
	bobTook := time.Since(bobStart)
	during := m.stats()
	active, _ := m.taskCounts()
	p0 := j.polls.Load()
	time.Sleep(3 * time.Second)
	polls := j.polls.Load() - p0

	// The remote finishes every job; after the retention, what is left?
	j.done.Store(true)
	finished := time.Now()
	deadline := finished.Add(20 * time.Second)
	a, term := m.taskCounts()
	for (a > 0 || term > 0) && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		a, term = m.taskCounts()
	}
	fmt.Printf("a17-tasks (%s): alive=%v; alice's 5000 submits in %.1fs: %d accepted, %d refused, %d failed; upstream submit ran %d times; "+
		"bob then: accepted=%v err=%v in %v; %d active records polled %d times in 3s; records left %.1fs after the remote finished: %d active, %d finished | before %s | after the flood %s | at the end %s\n",
		note, m.alive(), took.Seconds(), accepted.Load(), refused.Load(), failed.Load(), j.submits.Load(),
		bobOK, bobErr, bobTook.Round(time.Millisecond), active, polls, time.Since(finished).Seconds(), a, term, before, during, m.stats())
	return nil
}
