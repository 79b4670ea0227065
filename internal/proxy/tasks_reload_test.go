package proxy_test

import (
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// TestReloadRefusesTaskToolsetsRemoval: task_toolsets are startup-only, as
// in DeerFlow. A reload that drops them from a running task server would
// turn its hidden status and cancel tools into ordinary ones while its
// tasks still poll them: it is refused for that server, which keeps its
// task toolsets, and the log says a restart is needed.
func TestReloadRefusesTaskToolsetsRemoval(t *testing.T) {
	st := boltStore(t)
	t.Cleanup(func() { _ = st.Close() })
	up := &mcptest.TaskServer{}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	other := mcptest.ServeHTTP(t, mcptest.NewServer("other"))
	m := startMux(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`,
		"other": {"type": "http", "url": "`+other.URL+`/mcp"}}, "mcp_tasks": {"enabled": true}}`, proxy.Options{TaskStore: st})
	next := parseCfg(t, `{"mcpServers": {"jobs": {"type": "http", "url": "`+upTS.URL+`/mcp"},
		"other": {"type": "http", "url": "`+other.URL+`/mcp", "tool_name_prefix": false}}, "mcp_tasks": {"enabled": true}}`)
	if err := m.srv.Apply(next); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, m.ts.URL, nil)
	waitUntil(t, func() bool { return contains(toolNames(t, cs), "echo") }) // the other server reloaded
	names := toolNames(t, cs)
	for _, n := range []string{"jobs_job_status", "jobs_cancel_job"} {
		if contains(names, n) {
			t.Errorf("%s became an ordinary tool after task_toolsets were removed by a reload: %v", n, names)
		}
	}
	if !contains(names, "jobs_submit_job") || !contains(names, "list_background_tasks") {
		t.Errorf("the task server's tools are gone: %v", names)
	}
	if _, res := callText(t, cs, "jobs_submit_job", map[string]any{"input": "x"}); res.IsError {
		t.Fatal("the task server stopped running durable tasks")
	}
	assertRestartLogged(t, m.logs.String(), "jobs")
}

// TestReloadRefusesTaskToolsetsWhenStartedWithoutTasks: a mux started
// without mcp_tasks has no task store; a reload that turns mcp_tasks on
// and gives a server task_toolsets cannot run them. The change is refused
// for that server (it keeps running as before, its tools as ordinary
// tools), with a log line saying a restart is needed, instead of silently
// dropping its submit tool.
func TestReloadRefusesTaskToolsetsWhenStartedWithoutTasks(t *testing.T) {
	up := &mcptest.TaskServer{}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	other := mcptest.ServeHTTP(t, mcptest.NewServer("other"))
	m := startMux(t, `{"mcpServers": {"jobs": {"type": "http", "url": "`+upTS.URL+`/mcp"},
		"other": {"type": "http", "url": "`+other.URL+`/mcp"}}}`, proxy.Options{})
	next := parseCfg(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`,
		"other": {"type": "http", "url": "`+other.URL+`/mcp", "tool_name_prefix": false}}, "mcp_tasks": {"enabled": true}}`)
	if err := m.srv.Apply(next); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, m.ts.URL, nil)
	waitUntil(t, func() bool { return contains(toolNames(t, cs), "echo") })
	names := toolNames(t, cs)
	if !contains(names, "jobs_submit_job") {
		t.Errorf("the submit tool was silently dropped: %v", names)
	}
	assertRestartLogged(t, m.logs.String(), "jobs")
}

// TestReloadRefusesNewTaskServer: a server added with task_toolsets by a
// reload is not started (its tasks would poll settings the startup
// snapshot does not hold); the log says a restart is needed.
func TestReloadRefusesNewTaskServer(t *testing.T) {
	st := boltStore(t)
	t.Cleanup(func() { _ = st.Close() })
	up := &mcptest.TaskServer{}
	upTS := mcptest.ServeHTTP(t, up.MCP())
	other := mcptest.ServeHTTP(t, mcptest.NewServer("other"))
	m := startMux(t, `{"mcpServers": {"other": {"type": "http", "url": "`+other.URL+`/mcp"}}, "mcp_tasks": {"enabled": true}}`, proxy.Options{TaskStore: st})
	next := parseCfg(t, `{"mcpServers": {"jobs": `+mcptest.TaskServerJSON(upTS.URL+"/mcp", "")+`,
		"other": {"type": "http", "url": "`+other.URL+`/mcp", "tool_name_prefix": false}}, "mcp_tasks": {"enabled": true}}`)
	if err := m.srv.Apply(next); err != nil {
		t.Fatal(err)
	}
	cs := connect(t, m.ts.URL, nil)
	waitUntil(t, func() bool { return contains(toolNames(t, cs), "echo") })
	if names := toolNames(t, cs); contains(names, "jobs_submit_job") {
		t.Errorf("a task server added by a reload runs: %v", names)
	}
	assertRestartLogged(t, m.logs.String(), "jobs")
}

// assertRestartLogged checks that the log has a warning for server saying
// a restart is needed.
func assertRestartLogged(t *testing.T, logs, server string) {
	t.Helper()
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"server":"`+server+`"`) && strings.Contains(l, "restart mcp-mux") {
			return
		}
	}
	t.Errorf("no log line for %s saying a restart is needed:\n%s", server, logs)
}
