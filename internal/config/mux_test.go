package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMuxBlocks(t *testing.T) {
	cfg := mustLoad(t, `{
	  "guardrails": {"enabled": false, "fail_closed": false, "allowed_tools": ["a_x"], "denied_tools": ["a_y"]},
	  "tool_search": {"enabled": true, "auto_promote_top_k": 5, "always_listed": ["a_*", "b_read"]},
	  "mcp_tasks": {"enabled": true, "poll_interval_seconds": 2.5, "lease_seconds": 60, "max_concurrent_polls": 4,
	                "max_poll_backoff_seconds": 100, "input_required_poll_interval_seconds": 30,
	                "tracking_degraded_after_errors": 5, "max_result_bytes": 2048, "result_preview_max_chars": 100,
	                "max_active_tasks_per_user": 7, "retention_seconds": 3600},
	  "store": {"redis_url": "$REDIS_URL", "key_prefix": "mux:"},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$KEY_ALICE"}},
	              "secrets_header": "X-S", "thread_header": "X-T", "user_header": "X-U",
	              "allowed_hosts": ["mux.local"], "allowed_origins": ["https://app"],
	              "max_sessions": 50, "session_idle_timeout_seconds": 90,
	              "max_sessions_per_user": 5, "max_listens_per_user": 50, "max_parked_calls": 40, "max_parked_calls_per_user": 3},
	  "admin": {"token": "$ADMIN"}
	}`, map[string]string{"REDIS_URL": "redis://:pw@localhost:6379/0", "KEY_ALICE": "k-a", "ADMIN": "adm"})

	if want := (Guardrails{AllowedTools: []string{"a_x"}, DeniedTools: []string{"a_y"}}); !reflect.DeepEqual(cfg.Guardrails, want) {
		t.Errorf("guardrails = %+v", cfg.Guardrails)
	}
	if want := (ToolSearch{Enabled: true, AutoPromoteTopK: 5, AlwaysListed: []string{"a_*", "b_read"}}); !reflect.DeepEqual(cfg.ToolSearch, want) {
		t.Errorf("tool_search = %+v", cfg.ToolSearch)
	}
	want := Tasks{Enabled: true, PollInterval: 2500 * time.Millisecond, Lease: time.Minute, MaxConcurrentPolls: 4,
		MaxPollBackoff: 100 * time.Second, InputRequiredPollInterval: 30 * time.Second,
		TrackingDegradedAfterErrors: 5, MaxResultBytes: 2048, ResultPreviewMaxChars: 100,
		MaxActiveTasksPerUser: 7, Retention: time.Hour}
	if cfg.Tasks != want {
		t.Errorf("mcp_tasks = %+v", cfg.Tasks)
	}
	if cfg.Store.RedisURL.Reveal() != "redis://:pw@localhost:6379/0" || cfg.Store.KeyPrefix != "mux:" {
		t.Errorf("store = %+v", cfg.Store)
	}
	in := cfg.Inbound
	if in.Auth.Mode != AuthAPIKeys || in.Auth.Keys["alice"].Reveal() != "k-a" || in.Auth.UserClaim != "sub" ||
		in.SecretsHeader != "X-S" || in.ThreadHeader != "X-T" || in.UserHeader != "X-U" ||
		!reflect.DeepEqual(in.AllowedHosts, []string{"mux.local"}) || !reflect.DeepEqual(in.AllowedOrigins, []string{"https://app"}) ||
		in.MaxSessions != 50 || in.SessionIdleTimeout != 90*time.Second ||
		in.MaxSessionsPerUser != 5 || in.MaxListensPerUser != 50 || in.MaxParkedCalls != 40 || in.MaxParkedCallsPerUser != 3 {
		t.Errorf("inbound = %+v", in)
	}
	if cfg.Admin.Token.Reveal() != "adm" {
		t.Error("admin token not expanded")
	}
	if len(cfg.Warnings) != 0 || len(cfg.Extra) != 0 {
		t.Errorf("warnings %v extra %v", cfg.Warnings, cfg.Extra)
	}
}

func TestMuxBlockDefaultsPartial(t *testing.T) {
	cfg := mustLoad(t, `{"guardrails": {"denied_tools": ["x"]}, "mcp_tasks": {"enabled": true}, "inbound": {}, "store": null}`, nil)
	if !cfg.Guardrails.Enabled || !cfg.Guardrails.FailClosed || cfg.Guardrails.AllowedTools != nil {
		t.Errorf("guardrails = %+v", cfg.Guardrails)
	}
	if cfg.Tasks.PollInterval != 5*time.Second || cfg.Tasks.ResultPreviewMaxChars != 2000 || !cfg.Tasks.Enabled ||
		cfg.Tasks.MaxActiveTasksPerUser != 100 || cfg.Tasks.Retention != 7*24*time.Hour {
		t.Errorf("tasks = %+v", cfg.Tasks)
	}
	if cfg.Inbound.SecretsHeader != "X-Mux-Secrets" || cfg.Inbound.Auth.Mode != AuthNone || cfg.Inbound.Auth.AllowRemote ||
		cfg.Store.KeyPrefix != "mcp-mux:" || cfg.Inbound.MaxSessions != 10000 || cfg.Inbound.SessionIdleTimeout != 30*time.Minute {
		t.Errorf("inbound %+v store %+v", cfg.Inbound, cfg.Store)
	}
	if in := cfg.Inbound; in.MaxParkedCalls != 1024 || in.MaxSessionsPerUser != 2500 || in.MaxListensPerUser != 2500 || in.MaxParkedCallsPerUser != 256 {
		t.Errorf("per-caller shares %+v, want a quarter of each cap", in)
	}
	// The shares follow the caps they divide, never below 1.
	if in := mustLoad(t, `{"inbound": {"max_sessions": 3, "max_parked_calls": 8}}`, nil).Inbound; in.MaxSessionsPerUser != 1 || in.MaxListensPerUser != 1 || in.MaxParkedCallsPerUser != 2 {
		t.Errorf("shares of small caps %+v", in)
	}
	if cfg = mustLoad(t, `{"inbound": {"auth": {"mode": "none", "allow_remote": true}}}`, nil); !cfg.Inbound.Auth.AllowRemote {
		t.Errorf("allow_remote not read: %+v", cfg.Inbound.Auth)
	}
	cfg = mustLoad(t, `{"guardrails": {"allowed_tools": []}}`, nil)
	if cfg.Guardrails.AllowedTools == nil || len(cfg.Guardrails.AllowedTools) != 0 {
		t.Errorf("an empty allowlist must stay non-nil: %#v", cfg.Guardrails.AllowedTools)
	}
}

// TestTelemetryTrustParent: telemetry.trust_parent is off unless set.
func TestTelemetryTrustParent(t *testing.T) {
	if cfg := mustLoad(t, `{"telemetry": {"enabled": true}}`, nil); cfg.Telemetry.TrustParent {
		t.Error("trust_parent is on by default")
	}
	if cfg := mustLoad(t, `{}`, nil); cfg.Telemetry.TrustParent {
		t.Error("trust_parent is on without a telemetry block")
	}
	if cfg := mustLoad(t, `{"telemetry": {"trust_parent": true}}`, nil); !cfg.Telemetry.TrustParent {
		t.Error("trust_parent: true not read")
	}
}

// TestAdminMetrics: admin.metrics is open unless set (issue 39), also
// without an admin block.
func TestAdminMetrics(t *testing.T) {
	for content, want := range map[string]string{
		`{}`: MetricsOpen, `{"admin": {"token": "t"}}`: MetricsOpen,
		`{"admin": {"token": "t", "metrics": "admin_token"}}`: MetricsAdminToken,
		`{"admin": {"metrics": "ops_listener"}}`:              MetricsOpsListener,
	} {
		if cfg := mustLoad(t, content, nil); cfg.Admin.Metrics != want {
			t.Errorf("%s: metrics %q, want %q", content, cfg.Admin.Metrics, want)
		}
	}
}

// TestTelemetryOff: only a written "enabled": false is Off, which keeps
// the OTEL_* variables from turning export on (issue 39); an absent key,
// an absent block or null leave it to them.
func TestTelemetryOff(t *testing.T) {
	for content, want := range map[string]bool{
		`{}`: false, `{"telemetry": {}}`: false, `{"telemetry": {"enabled": null}}`: false,
		`{"telemetry": {"enabled": true}}`: false, `{"telemetry": {"enabled": false}}`: true,
	} {
		if cfg := mustLoad(t, content, nil); cfg.Telemetry.Off != want {
			t.Errorf("%s: Off = %v, want %v", content, cfg.Telemetry.Off, want)
		}
	}
}

func TestToolSearchClamp(t *testing.T) {
	for value, want := range map[string]int{"0": 1, "-4": 1, "9": 5, "1": 1} {
		cfg := mustLoad(t, `{"tool_search": {"auto_promote_top_k": `+value+`}}`, nil)
		if cfg.ToolSearch.AutoPromoteTopK != want {
			t.Errorf("%s: top_k = %d, want %d", value, cfg.ToolSearch.AutoPromoteTopK, want)
		}
		if clamped := value != "1"; clamped != (len(cfg.Warnings) == 1) {
			t.Errorf("%s: warnings = %v", value, cfg.Warnings)
		} else if clamped && cfg.Warnings[0].Field != "tool_search.auto_promote_top_k" {
			t.Errorf("%s: warning = %+v", value, cfg.Warnings[0])
		}
	}
}

func TestMuxBlockProblems(t *testing.T) {
	tests := []struct {
		content string
		want    []string
	}{
		{`{"guardrails": {"enabled": true, "allow": ["x"]}}`, []string{"guardrails.allow: unknown key"}},
		{`{"guardrails": {"enabled": "yes", "denied_tools": "x"}}`, []string{
			"guardrails.enabled: must be a boolean, not a string", "guardrails.denied_tools: must be a list of strings, not a string"}},
		{`{"guardrails": []}`, []string{"guardrails: must be an object"}},
		{`{"tool_search": {"auto_promote_top_k": 2.5}}`, []string{"tool_search.auto_promote_top_k: must be a whole number"}},
		{`{"mcp_tasks": {"poll_interval_seconds": 0, "max_result_bytes": 10, "lease": 5}}`, []string{
			"mcp_tasks.poll_interval_seconds: must be between 1 and 300 seconds",
			"mcp_tasks.max_result_bytes: must be between 1024 and 10485760",
			"mcp_tasks.lease: unknown key"}},
		{`{"mcp_tasks": {"max_active_tasks_per_user": 0, "retention_seconds": 0}}`, []string{
			"mcp_tasks.max_active_tasks_per_user: must be between 1 and 100000",
			"mcp_tasks.retention_seconds: must be between 1 and 31536000"}},
		{`{"store": {"redis_url": "http://localhost"}}`, []string{"store.redis_url: must be a redis://, rediss:// or unix:// URL"}},
		{`{"store": {"redis_url": "unix:///r.sock", "redis_mode": "cluster"}}`, []string{"store.redis_url: must be a redis:// or rediss:// URL in cluster mode"}},
		{`{"store": {"redis_url": "redis://:pw@s1:26379", "redis_mode": "sentinel"}}`, []string{"store.redis_url: needs master_name=<the primary's name> in sentinel mode"}},
		{`{"store": {"redis_url": "rediss://h?skip_verify=true"}}`, []string{"store.redis_url: skip_verify turns certificate checks off; give store.tls_ca_file instead"}},
		{`{"store": {"redis_url": "redis://h", "sentinel_password": "x"}}`, []string{`store.sentinel_password: is set but store.redis_mode is "standalone", not sentinel`}},
		{`{"store": {"redis_mode": "ring"}}`, []string{"store.redis_mode: must be one of 'standalone', 'sentinel' or 'cluster'"}},
		{`{"store": {"wait_replicas": 9}}`, []string{"store.wait_replicas: must be between 0 and 5"}},
		{`{"inbound": {"auth": {"mode": "api_keys"}}}`, []string{"inbound.auth.keys: api_keys mode requires at least one key"}},
		{`{"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$UNSET"}}}}`, []string{
			"inbound.auth.keys.alice: API key must not be empty (is its environment variable set?)"}},
		{`{"inbound": {"auth": {"mode": "jwt", "user_claim": ""}}}`, []string{
			"inbound.auth.jwks_url: jwt mode requires jwks_url", "inbound.auth.issuer: jwt mode requires issuer",
			"inbound.auth.audience: jwt mode requires audience", "inbound.auth.user_claim: jwt mode requires user_claim"}},
		{`{"inbound": {"auth": {"mode": "jwt", "jwks_url": "file:///k", "issuer": "i", "audience": "a"}}}`, []string{
			"inbound.auth.jwks_url: must be an absolute http or https URL"}},
		{`{"inbound": {"auth": {"mode": "oauth"}}}`, []string{"inbound.auth.mode: must be one of 'none', 'trusted_header', 'api_keys' or 'jwt'"}},
		{`{"inbound": {"secrets_header": "", "thread_header": "X Thread", "extra": 1}}`, []string{
			"inbound.secrets_header: header name must not be empty",
			"inbound.thread_header: header name contains a character that is not allowed in an HTTP header name",
			"inbound.extra: unknown key"}},
		{`{"inbound": {"max_sessions": 0, "session_idle_timeout_seconds": 0.5}}`, []string{
			"inbound.max_sessions: must be between 1 and 1000000",
			"inbound.session_idle_timeout_seconds: must be between 1 and 604800 seconds"}},
		{`{"inbound": {"max_sessions": 10, "max_sessions_per_user": 11, "max_listens_per_user": 0, "max_parked_calls": 0, "max_parked_calls_per_user": 2000}}`, []string{
			"inbound.max_parked_calls: must be between 1 and 100000",
			"inbound.max_sessions_per_user: must be between 1 and inbound.max_sessions (10)",
			"inbound.max_listens_per_user: must be between 1 and inbound.max_sessions (10)",
			"inbound.max_parked_calls_per_user: must be between 1 and inbound.max_parked_calls (1024)"}},
		{`{"inbound": {"public_url": "https://u:p@mux.example/"}}`, []string{
			"inbound.public_url: must be an absolute http or https URL with no credentials, query or fragment (the base URL browsers reach mcp-mux at)"}},
		{`{"admin": {"token": "$MUX_ADMIN_TOKEN"}}`, []string{
			"admin.token: is empty because the environment variable MUX_ADMIN_TOKEN is not set; set it, or remove admin.token to turn the admin API off"}},
		{`{"admin": {"token": ""}}`, []string{
			"admin.token: must not be empty; set a token, or remove admin.token to turn the admin API off"}},
		{`{"admin": {"token": 5, "user": "x"}}`, []string{"admin.token: must be a string, not a number", "admin.user: unknown key"}},
		{`{"admin": {"token": "t", "metrics": "token"}}`, []string{"admin.metrics: must be one of 'open', 'admin_token' or 'ops_listener'"}},
		{`{"admin": {"metrics": "admin_token"}}`, []string{`admin.metrics: is "admin_token" but admin.token is not set; set one, or choose "open" or "ops_listener"`}},
		{`{"telemetry": {"trust_parent": "yes"}}`, []string{"telemetry.trust_parent: must be a boolean, not a string"}},
		{`{"telemetry": {"trust_parents": true}}`, []string{`telemetry.trust_parents: unknown key; did you mean "trust_parent"?`}},
		{`{"admin": {"allowed_env": ["OK_1", "1BAD", "A-B", ""]}}`, []string{
			"admin.allowed_env[1]: must be an environment variable name (letters, digits and _, not starting with a digit)",
			"admin.allowed_env[2]: must be an environment variable name (letters, digits and _, not starting with a digit)",
			"admin.allowed_env[3]: must be an environment variable name (letters, digits and _, not starting with a digit)"}},
	}
	for _, tt := range tests {
		t.Run(tt.content, func(t *testing.T) {
			cfg, err := load(t, "c.json", tt.content, nil)
			if err == nil {
				t.Fatal("want an error")
			}
			if cfg == nil {
				t.Fatal("the config should still be returned with problems")
			}
			var got []string
			for _, p := range Problems(err) {
				got = append(got, p.Error())
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems = %q\nwant %q", got, tt.want)
			}
			if len(strings.Split(err.Error(), "\n")) != len(tt.want) {
				t.Errorf("error text = %q", err)
			}
		})
	}
}

// TestPublicURL: inbound.public_url is kept without its trailing slash,
// and makes an authorization_code server valid.
func TestPublicURL(t *testing.T) {
	cfg, err := load(t, "c.json", `{"inbound": {"public_url": "https://mux.example/base/"},
	  "mcpServers": {"gh": {"type": "http", "url": "https://gh.example/mcp", "oauth": {"grant_type": "authorization_code"}}}}`, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Inbound.PublicURL != "https://mux.example/base" || !cfg.Server("gh").OAuth.PerUser() {
		t.Fatalf("public_url %q, per user %v", cfg.Inbound.PublicURL, cfg.Server("gh").OAuth.PerUser())
	}
	cfg, err = load(t, "c.json", `{"mcpServers": {"gh": {"type": "http", "url": "https://gh.example/mcp", "oauth": {"grant_type": "authorization_code"}},
	  "ok": {"command": "x"}}}`, nil)
	if err != nil || len(cfg.Servers) != 1 || len(cfg.Invalid) != 1 {
		t.Fatalf("without public_url: err %v, servers %d, invalid %+v", err, len(cfg.Servers), cfg.Invalid)
	}
	if got := cfg.Invalid[0].Error(); !strings.Contains(got, "authorization_code needs inbound.public_url") {
		t.Fatalf("invalid gh: %s", got)
	}
}

func TestMuxProblemsDoNotHideServerProblems(t *testing.T) {
	cfg, err := load(t, "c.json", `{"mcpServers": {"ok": {"command": "x"}, "bad": {}}, "guardrails": {"x": 1}}`, nil)
	if err == nil || cfg == nil || len(cfg.Invalid) != 1 || len(cfg.Servers) != 1 {
		t.Fatalf("err %v cfg %+v", err, cfg)
	}
}

// TestGuardrailsProviderForm: DeerFlow's documented guardrail form
// (guardrails.enabled + provider.use + provider.config.denied_tools, from
// its MCP server doc) loads as the same lists as the flat form, in JSON
// and YAML.
func TestGuardrailsProviderForm(t *testing.T) {
	want := Guardrails{Enabled: true, FailClosed: true, DeniedTools: []string{"openviking_forget"}}
	cfg := mustLoad(t, `{"guardrails": {"enabled": true, "provider": {"use": "deerflow.guardrails.builtin:AllowlistProvider",
		"config": {"denied_tools": ["openviking_forget"]}}}}`, nil)
	if !reflect.DeepEqual(cfg.Guardrails, want) {
		t.Errorf("JSON provider form: guardrails = %+v, want %+v", cfg.Guardrails, want)
	}
	yaml, err := load(t, "config.yaml", "guardrails:\n  enabled: true\n  passport: agent-7\n  provider:\n    use: deerflow.guardrails.builtin:AllowlistProvider\n    config:\n      denied_tools: [\"openviking_forget\"]\n      allowed_tools: [\"a\", \"openviking_forget\"]\n", nil)
	if err != nil {
		t.Fatalf("YAML provider form: %v", err)
	}
	want.AllowedTools = []string{"a", "openviking_forget"}
	if !reflect.DeepEqual(yaml.Guardrails, want) {
		t.Errorf("YAML provider form: guardrails = %+v, want %+v", yaml.Guardrails, want)
	}
}

// TestGuardrailsProviderProblems: a provider mcp-mux does not have, or the
// lists given twice, fail the load with a message naming the field.
func TestGuardrailsProviderProblems(t *testing.T) {
	for content, want := range map[string]string{
		`{"guardrails": {"provider": {"use": "my.module:Custom"}}}`:                                            "guardrails.provider.use: mcp-mux has only the built-in allow/deny lists (deerflow.guardrails.builtin:AllowlistProvider); 'my.module:Custom' is not available",
		`{"guardrails": {"denied_tools": ["a"], "provider": {"config": {"denied_tools": ["b"]}}}}`:             "guardrails.provider.config.denied_tools: denied_tools is also set at guardrails.denied_tools; set it in one place",
		`{"guardrails": {"provider": {"config": {"max": 1}}}}`:                                                 "guardrails.provider.config.max: unknown key",
		`{"guardrails": {"provider": {"use": "deerflow.guardrails.builtin:AllowlistProvider", "kwargs": {}}}}`: "guardrails.provider.kwargs: unknown key",
	} {
		_, err := load(t, "c.json", content, nil)
		var got []string
		for _, p := range Problems(err) {
			got = append(got, p.Error())
		}
		if len(got) != 1 || got[0] != want {
			t.Errorf("%s:\n got %q\nwant %q", content, got, want)
		}
	}
}
