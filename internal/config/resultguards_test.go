package config

import (
	"strings"
	"testing"
	"time"
)

// A top-level block and a server's, which replaces it for that server.
func TestResultGuards(t *testing.T) {
	cfg := mustLoad(t, `{"result_guards": {"redact": true, "max_result_chars": 20000, "max_result_tokens": 4000, "on_exceed": "spill", "spill_ttl_seconds": 60},
		"mcpServers": {"a": {"type": "http", "url": "http://a.example/mcp"}, "b": {"type": "http", "url": "http://b.example/mcp", "result_guards": {"max_result_tokens": 10000}}}}`, nil)
	g := cfg.ResultGuardsFor(cfg.Server("a"))
	if g == nil || !g.Redact || g.OnExceed != OnExceedSpill || g.SpillTTL != time.Minute {
		t.Fatalf("a's guards = %+v", g)
	}
	if chars, by := g.Budget(); chars != 16000 || by != "result_guards.max_result_tokens" {
		t.Errorf("a's budget = %d set by %q, want the smaller: 16000 by max_result_tokens", chars, by)
	}
	b := cfg.ResultGuardsFor(cfg.Server("b"))
	if b == nil || b.Redact || b.OnExceed != OnExceedTruncate || b.SpillTTL != DefaultSpillTTL {
		t.Fatalf("b's guards = %+v, want its own block", b)
	}
	if chars, by := b.Budget(); chars != 40000 || by != "result_guards.max_result_tokens" {
		t.Errorf("b's budget = %d by %q", chars, by)
	}
	none := mustLoad(t, `{"mcpServers": {"a": {"type": "http", "url": "http://a.example/mcp"}}}`, nil)
	if g := none.ResultGuardsFor(none.Server("a")); g != nil {
		t.Errorf("no block gives %+v", g)
	}
	if chars, _ := (*ResultGuards)(nil).Budget(); chars != 0 {
		t.Errorf("no block has a budget of %d", chars)
	}
}

func TestResultGuardsProblems(t *testing.T) {
	for in, want := range map[string]string{
		`{"max_result_chars": 10}`:                                                     "result_guards.max_result_chars: must be between 1000 and 50000000",
		`{"max_result_tokens": 1e9}`:                                                   "result_guards.max_result_tokens: must be between 250 and 12500000",
		`{"max_result_chars": 5000, "on_exceed": "drop"}`:                              `result_guards.on_exceed`,
		`{"redact": true, "on_exceed": "error"}`:                                       "result_guards.on_exceed: applies only with max_result_chars or max_result_tokens",
		`{"max_result_chars": 5000, "spill_ttl_seconds": 60}`:                          `result_guards.spill_ttl_seconds: applies only with on_exceed "spill"`,
		`{"max_result_chars": 5000, "on_exceed": "spill", "spill_ttl_seconds": 90000}`: "result_guards.spill_ttl_seconds: must be between 1 and 86400 seconds",
		`{"redact": true, "max_result_char": 5000}`:                                    `result_guards.max_result_char: unknown key; did you mean "max_result_chars"?`,
		`{"redact": "yes"}`:                                                            "result_guards.redact: must be a boolean",
	} {
		_, err := Parse([]byte(`{"result_guards": `+in+`}`), LoadOptions{Filename: "c.json", LookupEnv: envOf(nil)})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
	cfg, err := Parse([]byte(`{"mcpServers": {"a": {"type": "http", "url": "http://a.example/mcp", "result_guards": {"max_result_chars": 1}}}}`), LoadOptions{Filename: "c.json", LookupEnv: envOf(nil)})
	if err != nil || len(cfg.Invalid) != 1 || !strings.Contains(cfg.Invalid[0].Error(), "result_guards.max_result_chars") {
		t.Errorf("a server's bad block: %v, %+v", err, cfg)
	}
	if cfg := mustLoad(t, `{"result_guard": {"redact": true}}`, nil); len(cfg.Warnings) == 0 || !strings.Contains(cfg.Warnings[0].Error(), `"result_guards"`) {
		t.Errorf("a near miss of result_guards gives no warning: %+v", cfg.Warnings)
	}
}
