package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestProcessorsBlock: the top-level and a server's processors, in order,
// with their defaults.
func TestProcessorsBlock(t *testing.T) {
	cfg, err := load(t, "c.json", `{"processors": [
	  {"name": "pii", "url": "https://pii.example/check", "phase": "both"},
	  {"name": "size", "url": "http://127.0.0.1:9/p", "phase": "response", "tools": ["db_*"], "methods": ["tools/call"],
	   "timeout_ms": 500, "on_error": "allow", "max_body_bytes": 4096, "max_concurrent": 4}],
	 "mcpServers": {"db": {"type": "http", "url": "https://db.example/mcp", "processors": [{"name": "pii", "url": "https://db-pii.example/", "phase": "request"}]}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Processor{
		{Name: "pii", URL: "https://pii.example/check", Methods: []string{"tools/call"}, Phase: PhaseBoth, Timeout: DefaultProcessorTimeout,
			MaxBodyBytes: DefaultProcessorMaxBody, MaxConcurrent: DefaultProcessorConcurrent},
		{Name: "size", URL: "http://127.0.0.1:9/p", Methods: []string{"tools/call"}, Tools: []string{"db_*"}, Phase: PhaseResponse,
			Timeout: 500 * time.Millisecond, FailOpen: true, MaxBodyBytes: 4096, MaxConcurrent: 4},
	}
	if !reflect.DeepEqual(cfg.Processors, want) {
		t.Fatalf("processors = %+v\nwant %+v", cfg.Processors, want)
	}
	db := cfg.Server("db")
	if db == nil || len(db.Processors) != 1 || db.Processors[0].Name != "pii" || !db.Processors[0].Request() || db.Processors[0].Response() {
		t.Fatalf("the server's processors: %+v", db)
	}
	if _, ok := cfg.Extra["processors"]; ok {
		t.Fatal("the processors list is kept as an unknown top-level key")
	}
	if _, ok := db.Extra["processors"]; ok {
		t.Fatal("a server's processors are kept as an unknown key")
	}
}

// TestProcessorsProblems: a processor is checked strictly, each problem
// naming its field and never the URL.
func TestProcessorsProblems(t *testing.T) {
	tests := []struct {
		content string
		want    []string
	}{
		{`{"processors": {}}`, []string{"processors: must be a list of processors, not an object"}},
		{`{"processors": [{"url": "https://p.example"}]}`, []string{
			"processors[0].name: is required (it names the processor in denials, audit records and metrics)",
			"processors[0].phase: is required: one of 'request', 'response' or 'both'"}},
		{`{"processors": [{"name": "a b", "url": "ftp://user:hunter2@p.example", "phase": "all", "methods": ["prompts/get"], "tools": ["["]}]}`, []string{
			"processors[0].name: must be 1..64 letters, digits, '-', '_' or '.'",
			"processors[0].url: must be an absolute http or https URL with no credentials or fragment",
			`processors[0].methods[0]: must be "tools/call": processors see tool calls only`,
			"processors[0].tools[0]: is not a valid glob",
			"processors[0].phase: must be one of 'request', 'response' or 'both'"}},
		{`{"processors": [{"name": "a", "url": "https://p.example", "phase": "request", "timeout_ms": 30001, "on_error": "ignore", "max_body_bytes": 16777217, "max_concurrent": 0, "method": []}]}`, []string{
			"processors[0].timeout_ms: must be between 10 and 30000",
			"processors[0].on_error: must be one of 'deny' or 'allow'",
			"processors[0].max_body_bytes: must be between 1024 and 16777216",
			"processors[0].max_concurrent: must be between 1 and 1024",
			`processors[0].method: unknown key; did you mean "methods"?`}},
		{`{"processors": [{"name": "a", "url": "https://p.example", "phase": "request"}, {"name": "a", "url": "https://q.example", "phase": "request"}]}`, []string{
			`processors[1].name: "a" names another processor too; processor names must be unique`}},
		{`{"processors": [` + strings.Repeat(`{"name": "a"},`, 16) + `{"name": "a"}]}`, []string{"processors: has 17 processors; at most 16"}},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			_, err := load(t, "c.json", tt.content, nil)
			got := []string{}
			for _, p := range Problems(err) {
				got = append(got, p.Error())
				if strings.Contains(p.Error(), "hunter2") {
					t.Errorf("a problem echoes the URL's password: %v", p)
				}
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
		})
	}
	// A server's processors: a problem makes that server invalid, not the file.
	cfg, err := load(t, "c.json", `{"mcpServers": {"db": {"type": "http", "url": "https://db.example/mcp", "processors": [{"name": "p", "url": "https://p.example"}]},
	  "ok": {"type": "http", "url": "https://ok.example/mcp"}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Invalid) != 1 || cfg.Invalid[0].Name != "db" || !strings.Contains(cfg.Invalid[0].Error(), "processors[0].phase: is required") || cfg.Server("ok") == nil {
		t.Fatalf("invalid = %+v", cfg.Invalid)
	}
}
