package reload

import (
	"slices"
	"strings"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/config"
)

func parse(t *testing.T, doc string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(doc), config.LoadOptions{Filename: "c.json", LookupEnv: func(k string) (string, bool) {
		return map[string]string{"TOKEN": "tok-" + k}[k], k == "TOKEN"
	}})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestChanges: a reload's changes name each server added, removed,
// enabled, disabled, changed (and whether it reconnects), made invalid or
// valid again, then each top-level block changed — never a value.
func TestChanges(t *testing.T) {
	old := parse(t, `{"mcpServers": {
		"keep":    {"type": "http", "url": "https://keep/mcp"},
		"desc":    {"type": "http", "url": "https://desc/mcp", "description": "old words"},
		"pins":    {"type": "http", "url": "https://pins/mcp", "pin_tools": "warn"},
		"move":    {"type": "http", "url": "https://old-host/mcp"},
		"gone":    {"type": "http", "url": "https://gone/mcp"},
		"off":     {"type": "http", "url": "https://off/mcp"},
		"on":      {"type": "http", "url": "https://on/mcp", "enabled": false},
		"breaks":  {"type": "http", "url": "https://breaks/mcp"},
		"fixed":   {"type": "http"}
	}, "limits": {"rules": [{"name": "r", "scope": "tool", "calls": 5, "per_seconds": 1}]},
	   "approvals": {"rules": [{"name": "a", "approver": "caller", "condition": "args.n > 1"}]},
	   "processors": [{"name": "p", "url": "https://p/secret-path", "phase": "request"}]}`)
	same := parse(t, `{"approvals": {"rules": [{"name": "a", "approver": "caller", "condition": "args.n > 1"}]}}`)
	if c := Changes(same, parse(t, `{"approvals": {"rules": [{"name": "a", "approver": "caller", "condition": "args.n > 1"}]}}`)); len(c) != 0 {
		t.Errorf("the same approvals, compiled twice, change: %q", c)
	}
	next := parse(t, `{"mcpServers": {
		"keep":    {"type": "http", "url": "https://keep/mcp"},
		"desc":    {"type": "http", "url": "https://desc/mcp", "description": "new words"},
		"pins":    {"type": "http", "url": "https://pins/mcp", "pin_tools": "block"},
		"move":    {"type": "http", "url": "https://new-host/mcp"},
		"off":     {"type": "http", "url": "https://off/mcp", "enabled": false},
		"on":      {"type": "http", "url": "https://on/mcp"},
		"breaks":  {"type": "http"},
		"fixed":   {"type": "http", "url": "https://fixed/mcp"},
		"new":     {"type": "http", "url": "https://new/mcp"},
		"newoff":  {"type": "http", "url": "https://newoff/mcp", "enabled": false},
		"newbad":  {"type": "stdio"}
	}, "limits": {"rules": [{"name": "r", "scope": "tool", "calls": 6, "per_seconds": 1}]}, "tool_search": {"enabled": true},
	   "processors": [{"name": "p", "url": "https://p/secret-path", "phase": "both"}]}`)
	got := Changes(old, next)
	want := []string{
		"changed desc",
		"changed pins (pin_tools)",
		"changed move (connection settings: reconnects)",
		"disabled off",
		"enabled on",
		"changed fixed (valid again)",
		"added new",
		"added newoff (disabled)",
		"changed breaks (now invalid)",
		"added newbad (invalid)",
		"removed gone",
		"changed tool_search",
		"changed limits",
		"changed approvals",
		"changed processors",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Changes =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, line := range got {
		if strings.Contains(line, "words") || strings.Contains(line, "host") || strings.Contains(line, "secret-path") {
			t.Errorf("a change shows a value: %s", line)
		}
	}
	if c := Changes(old, old); len(c) != 0 {
		t.Errorf("the same file changes %q", c)
	}
	// A $VAR whose value changed reconnects the server though the file's
	// text is the same.
	a := parse(t, `{"mcpServers": {"s": {"type": "http", "url": "https://s/mcp", "headers": {"Authorization": "$TOKEN"}}}}`)
	b := parse(t, `{"mcpServers": {"s": {"type": "http", "url": "https://s/mcp", "headers": {"Authorization": "$TOKEN"}}}}`)
	b.Servers[0].Headers["Authorization"] = "other"
	if c := Changes(a, b); !slices.Equal(c, []string{"changed s (connection settings: reconnects)"}) {
		t.Errorf("changed variable: %q", c)
	}
	if Changes(nil, b) != nil {
		t.Error("nothing running: changes listed")
	}
}

// A changed result_guards block is listed, top level as a block and a
// server's own as a change of that server (kept connected).
func TestChangesResultGuards(t *testing.T) {
	old := parse(t, `{"mcpServers": {"s": {"type": "http", "url": "https://s/mcp"}}, "result_guards": {"redact": true}}`)
	next := parse(t, `{"mcpServers": {"s": {"type": "http", "url": "https://s/mcp", "result_guards": {"max_result_chars": 5000}}},
		"result_guards": {"redact": true, "max_result_chars": 20000}}`)
	if got, want := Changes(old, next), []string{"changed s", "changed result_guards"}; !slices.Equal(got, want) {
		t.Errorf("Changes = %q, want %q", got, want)
	}
	if c := Changes(old, parse(t, `{"mcpServers": {"s": {"type": "http", "url": "https://s/mcp"}}, "result_guards": {"redact": true}}`)); len(c) != 0 {
		t.Errorf("the same block changes: %q", c)
	}
}
