package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

const examplesDir = "../../examples"

// TestExampleConfigs: the shipped JSON and YAML examples are valid and the same.
func TestExampleConfigs(t *testing.T) {
	dir, err := filepath.Abs(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	jsonPath := filepath.Join(dir, "extensions_config.json")
	yamlPath := filepath.Join(dir, "extensions_config.yaml")
	for _, p := range []string{jsonPath, yamlPath} {
		// examples/run.sh sets DEMO_TOKEN and DEMO_URL; validate as it runs.
		r := runMux(t, t.TempDir(), []string{"DEMO_TOKEN=demo-token", "DEMO_URL=http://127.0.0.1:8932/mcp"}, "validate", "--config", p)
		if r.code != 0 || !strings.HasSuffix(r.stdout, ": ok, 2 server(s), 2 enabled\n") || r.stderr != "" {
			t.Errorf("validate %s: code %d, stdout %q, stderr %q", p, r.code, r.stdout, r.stderr)
		}
	}
	env := func(k string) (string, bool) {
		if k == "DEMO_URL" {
			return "http://127.0.0.1:8932/mcp", true
		}
		return "token-" + k, true
	}
	a, err := config.Load(jsonPath, config.LoadOptions{LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	b, err := config.Load(yamlPath, config.LoadOptions{LookupEnv: env})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Servers) != 2 || len(a.Invalid)+len(b.Invalid) != 0 {
		t.Fatalf("the example has %d valid servers (invalid: %+v %+v), want 2", len(a.Servers), a.Invalid, b.Invalid)
	}
	if len(a.Servers) != len(b.Servers) {
		t.Fatalf("JSON has %d servers, YAML %d", len(a.Servers), len(b.Servers))
	}
	for i := range a.Servers {
		x, y := *a.Servers[i], *b.Servers[i]
		x.Raw, y.Raw = nil, nil
		if !reflect.DeepEqual(x, y) {
			t.Errorf("server %d differs:\nJSON %+v\nYAML %+v", i, x, y)
		}
	}
}

// TestExampleEndToEnd runs the example as the README does (demo HTTP server
// plus mcp-mux on examples/extensions_config.json), on free ports, and calls
// a tool of each server. The npm "everything" server is used when npx is
// installed; its first start may download it.
func TestExampleEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts npm's server-everything")
	}
	demoBin := filepath.Join(t.TempDir(), "demo-http-server")
	if err := goBuild(demoBin, "../../examples/demo-http-server"); err != nil {
		t.Fatalf("building the demo server: %v", err)
	}
	demo := exec.Command(demoBin, "--listen", "127.0.0.1:0")
	demo.Env = baseEnv()
	out, err := demo.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	demo.Stderr = os.Stderr
	if err := demo.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = demo.Process.Signal(syscall.SIGTERM)
		_ = demo.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	demoURL, ok := strings.CutPrefix(strings.TrimSpace(line), "demo-http-server: serving ")
	if err != nil || !ok {
		t.Fatalf("demo server said %q, %v", line, err)
	}

	// The example config, its demo server on a free port through DEMO_URL,
	// and a marker in the stdio server's environment to find its processes.
	raw, err := os.ReadFile(filepath.Join(examplesDir, "extensions_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	servers := doc["mcpServers"].(map[string]any)
	marker := fmt.Sprintf("MCP_MUX_TEST_MARKER=example-%d-%d", os.Getpid(), time.Now().UnixNano())
	k, v, _ := strings.Cut(marker, "=")
	servers["everything"].(map[string]any)["env"] = map[string]any{k: v}
	want := []string{"demo_echo", "demo_headers"}
	// The example's everything server needs npx; CI (.ci/run) installs Node.
	_, npxErr := exec.LookPath("npx")
	if npxErr != nil {
		t.Fatalf("npx is required for the example's everything server: %v", npxErr)
	}
	want = append(want, "everything_echo")
	dir := t.TempDir()
	cfg := writeFile(t, dir, "extensions_config.json", mustJSON(t, doc))

	s := startServe(t, dir, []string{"DEMO_TOKEN=demo-token-e2e", "DEMO_URL=" + demoURL}, "--config", cfg, "--listen", "127.0.0.1:0")
	t.Cleanup(func() {
		for _, pid := range liveProcesses(nil, marker) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	cs := connect(t, s.url("/mcp"))
	waitToolsFor(t, cs, 3*time.Minute, want...)
	if got := callText(t, cs, "demo_echo", map[string]any{"text": "via mux"}); got != "via mux" {
		t.Errorf("demo_echo = %q", got)
	}
	if got := callText(t, cs, "demo_headers", nil); !strings.Contains(got, "X-Demo-Token: demo-token-e2e") {
		t.Errorf("demo_headers did not see the $DEMO_TOKEN header:\n%s", got)
	}
	if npxErr == nil {
		if got := callText(t, cs, "everything_echo", map[string]any{"message": "hello everything"}); !strings.Contains(got, "hello everything") {
			t.Errorf("everything_echo = %q", got)
		}
		res, err := cs.ListTools(t.Context(), &mcp.ListToolsParams{})
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range res.Tools {
			if tool.InputSchema == nil {
				t.Errorf("tool %s lost its input schema", tool.Name)
			}
		}
	}
	_ = cs.Close()
	if code := s.stop(stopTimeout); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	deadline := time.Now().Add(5 * time.Second)
	for live := liveProcesses(nil, marker); len(live) > 0; live = liveProcesses(nil, marker) {
		if time.Now().After(deadline) {
			t.Fatalf("server-everything processes left after mcp-mux exited: %v", live)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// TestExampleTaskServerEndToEnd runs examples/task-server with mcp-mux on
// its example config (the server on a free port) and completes a task end
// to end through the mux: submit, the mux polls, the result is read back.
func TestExampleTaskServerEndToEnd(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "task-server")
	if err := goBuild(bin, "../../examples/task-server"); err != nil {
		t.Fatalf("building the example task server: %v", err)
	}
	up := exec.Command(bin, "--listen", "127.0.0.1:0", "--work", "300ms")
	up.Env = baseEnv()
	out, err := up.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	up.Stderr = os.Stderr
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = up.Process.Signal(syscall.SIGTERM)
		_ = up.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	upURL, ok := strings.CutPrefix(strings.TrimSpace(line), "task-server: serving ")
	if err != nil || !ok {
		t.Fatalf("task server said %q, %v", line, err)
	}
	raw, err := os.ReadFile(filepath.Join(examplesDir, "task-server", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["mcpServers"].(map[string]any)["reports"].(map[string]any)["url"] = upURL
	dir := t.TempDir()
	cfg := writeFile(t, dir, "config.json", mustJSON(t, doc))
	if r := runMux(t, dir, nil, "validate", "--config", cfg); r.code != 0 {
		t.Fatalf("validate: %d %s %s", r.code, r.stdout, r.stderr)
	}
	s := startServe(t, dir, nil, "--config", cfg, "--listen", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"))
	cs := connect(t, s.url("/mcp"))
	waitToolsFor(t, cs, 30*time.Second, "reports_start_report", "get_background_task")

	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "reports_start_report", Arguments: map[string]any{"topic": "otters"}})
	if err != nil || res.IsError {
		t.Fatalf("submit: %v %+v", err, res)
	}
	b, _ := json.Marshal(res.StructuredContent)
	var sub struct {
		TaskID string `json:"task_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &sub); err != nil || !strings.HasPrefix(sub.TaskID, "mcp-task-") || sub.Status != "submitted" {
		t.Fatalf("submit answered %s", b)
	}
	var detail struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
		Error  *string         `json:"error"`
	}
	deadline := time.Now().Add(30 * time.Second)
	for detail.Status != "completed" {
		if time.Now().After(deadline) {
			t.Fatalf("the task did not complete: %+v", detail)
		}
		got := callText(t, cs, "get_background_task", map[string]any{"task_id": sub.TaskID})
		if err := json.Unmarshal([]byte(got), &detail); err != nil {
			t.Fatalf("get_background_task answered %q: %v", got, err)
		}
		if detail.Status == "failed" || detail.Status == "cancelled" {
			t.Fatalf("the task ended %s: %s", detail.Status, got)
		}
		if detail.Status != "completed" {
			time.Sleep(100 * time.Millisecond) // polling interval, not a proof
		}
	}
	if string(detail.Result) != `{"report":"All about otters.","topic":"otters"}` {
		t.Errorf("result %s", detail.Result)
	}
}
