package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/headercheck"
	"github.com/mcp-mux/mcp-mux/internal/secret"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// Guardrails is the "guardrails" block: allow/deny lists evaluated on visible
// tool names (DeerFlow's AllowlistProvider).
type Guardrails struct {
	Enabled bool // default true
	// FailClosed denies a call when evaluation fails (default true).
	FailClosed bool
	// AllowedTools: nil allows every tool; an empty non-nil list allows none.
	AllowedTools []string
	// DeniedTools always wins over AllowedTools.
	DeniedTools []string
}

// ToolSearch is the "tool_search" block: deferred tool schemas.
type ToolSearch struct {
	Enabled bool
	// AutoPromoteTopK is how many routing-keyword matches a query promotes
	// (default 3, clamped to 1..5).
	AutoPromoteTopK int
	// AlwaysListed are path.Match globs on visible tool names that stay
	// fully listed (and callable without a search) while the rest are
	// deferred; a profile's own always_listed replaces them in its view.
	AlwaysListed []string
}

// MaxAlwaysListed bounds the globs of one always_listed list.
const MaxAlwaysListed = 256

// Tasks is the "mcp_tasks" block: durable background tasks.
type Tasks struct {
	Enabled                     bool
	PollInterval                time.Duration // default 5s, 1..300s
	Lease                       time.Duration // default 120s, 5..3600s
	MaxConcurrentPolls          int           // default 8, 1..64
	MaxPollBackoff              time.Duration // default 300s, 1..3600s
	InputRequiredPollInterval   time.Duration // default 60s, 5..3600s
	TrackingDegradedAfterErrors int           // default 3, 1..100
	MaxResultBytes              int           // default 65536, 1024..10485760
	ResultPreviewMaxChars       int           // default 2000, 64..100000
	// MaxActiveTasksPerUser caps one caller's active (unfinished) tasks;
	// a submit past it is refused before the upstream sees it.
	MaxActiveTasksPerUser int // default 100, 1..100000
	// Retention is how long a finished task's record is kept.
	Retention time.Duration // default 7 days, 1s..365 days
}

// Store is the "store" block. An empty RedisURL selects the embedded
// single-node store.
type Store struct {
	RedisURL  secret.Value
	KeyPrefix string // default "mcp-mux:"
	// RedisMode is standalone (default), sentinel or cluster: which of
	// go-redis's URL forms RedisURL is in.
	RedisMode string
	// SentinelPassword authenticates to the sentinels (sentinel mode).
	SentinelPassword secret.Value
	// TLSCAFile is a PEM bundle a rediss:// server's certificate must
	// chain to (default: the system's CAs).
	TLSCAFile string
	// PoolSize is the shared client's connections per Redis node (0:
	// go-redis's default, 10 per CPU).
	PoolSize int
	// WaitReplicas is how many replicas a durable task's creation waits
	// for (WAIT) before it is acknowledged: default 1 in sentinel mode,
	// else 0; 0..5.
	WaitReplicas int
	// WaitTimeout bounds that wait (default 1 s, 10 ms..10 s).
	WaitTimeout time.Duration
}

// Telemetry is the "telemetry" block: OpenTelemetry traces over OTLP, off
// by default. The standard OTEL_* variables win over it, and turn export
// on unless it says "enabled": false. Read at startup.
type Telemetry struct {
	Enabled bool
	// Off: the block says "enabled": false (written, not the default), so
	// the OTEL_* variables do not turn export on.
	Off bool
	// Endpoint is the OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT wins); a
	// secret, since a URL may carry credentials.
	Endpoint secret.Value
	// Protocol is "http/protobuf" (default) or "grpc"
	// (OTEL_EXPORTER_OTLP_PROTOCOL wins).
	Protocol string
	// SampleRatio samples new traces and those of callers whose parent is not
	// trusted, (0, 1] (default 1; OTEL_TRACES_SAMPLER wins).
	SampleRatio float64
	// TrustParent takes a caller's trace context as the operator's: its
	// sampled flag decides and its tracestate goes upstream (default false:
	// the trace id is continued, sample_ratio decides, the tracestate is
	// dropped). A caller's baggage is never forwarded.
	TrustParent bool
	// UserID is how a caller's id appears in spans: "hashed" (default,
	// sha256), "plain" or "none".
	UserID string
	// Audit is the "audit" sub-block.
	Audit Audit
}

// Audit is telemetry.audit: one JSON record per tools/call, prompts/get
// and resources/read. Read at startup.
type Audit struct {
	Enabled bool
	// Output is "stderr" (default), "stdout" or an absolute file path.
	Output string
	// MaxFileMB rotates a file output past this size (default 100).
	MaxFileMB int
	// Detail is "minimal", "standard" (default) or "full".
	Detail string
	// UserID is how callers appear: "hashed" (default), "plain" or "none".
	UserID string
	// SlowCall is the duration from which the status page lists a call as
	// slow (default 1 s).
	SlowCall time.Duration
}

// Inbound is the "inbound" block: how downstream requests are authenticated
// and where the caller's context is carried.
type Inbound struct {
	Auth InboundAuth
	// SecretsHeader carries the secrets for headers_from_context (default "X-Mux-Secrets").
	SecretsHeader string
	// ThreadHeader carries the thread id (default "X-Mux-Thread-Id").
	ThreadHeader string
	// UserHeader carries the user id in trusted_header mode (default "X-Mux-User").
	UserHeader string
	// AllowedHosts and AllowedOrigins extend the DNS-rebinding checks.
	AllowedHosts, AllowedOrigins []string
	// MaxSessions caps open downstream sessions (default 10000); an
	// initialize past it is refused. Open 2026-07-28 subscriptions/listen
	// streams are capped by the same number, counted apart.
	MaxSessions int
	// MaxParkedCalls caps 2026-07-28 calls bridged to a legacy upstream
	// that wait for the client's retry (default 1024).
	MaxParkedCalls int
	// MaxSessionsPerUser, MaxListensPerUser and MaxParkedCallsPerUser are
	// one caller's shares of those caps (default a quarter of each, at
	// least 1), so that one caller cannot lock the others out. They do not
	// apply under auth mode none, whose one caller gets the whole caps.
	MaxSessionsPerUser, MaxListensPerUser, MaxParkedCallsPerUser int
	// SessionIdleTimeout closes a downstream session without traffic for
	// this long (default 30m).
	SessionIdleTimeout time.Duration
	// RequestStateKey is the secret the seals of 2026-07-28 requestStates
	// and passed-through task ids are derived from;
	// replicas behind one load balancer share it. Empty: a key per process.
	RequestStateKey secret.Value
	// ProfileBy is how a caller's identity selects its profile.
	ProfileBy ProfileBy
	// DefaultProfile is the profile of a caller no ProfileBy selects;
	// "": every tool (and /mcp/{profile} may pick any profile).
	DefaultProfile string
	// PublicURL is the base URL users' browsers reach mcp-mux at (no
	// trailing slash): connected accounts' redirect URI is
	// PublicURL/oauth/callback. Empty: no connected accounts.
	PublicURL string
}

// Inbound auth modes.
const (
	AuthNone          = "none"
	AuthTrustedHeader = "trusted_header"
	AuthAPIKeys       = "api_keys"
	AuthJWT           = "jwt"
)

// InboundAuth is "inbound.auth".
type InboundAuth struct {
	// Mode is AuthNone (default), AuthTrustedHeader, AuthAPIKeys or AuthJWT.
	Mode string
	// AllowRemote lets mode none serve a non-loopback listen address;
	// without it serve refuses to start there.
	AllowRemote bool
	// Keys maps a user id to its API key (api_keys mode).
	Keys map[string]secret.Value
	// JWKSURL, Issuer and Audience verify bearer JWTs (jwt mode).
	JWKSURL, Issuer, Audience string
	// UserClaim names the claim holding the user id (default "sub").
	UserClaim string
}

// Admin is the "admin" block. An empty Token disables the admin API.
type Admin struct {
	Token secret.Value
	// AllowedEnv names the environment variables an admin API write may
	// refer to as "$VAR" besides those the file's servers already use.
	AllowedEnv []string
	// Metrics is who may read /metrics on the main listener: MetricsOpen
	// (default), MetricsAdminToken or MetricsOpsListener. The ops listener
	// (--ops-listen) serves it open whatever this says. Read per request.
	Metrics string
}

// admin.metrics values.
const (
	// MetricsOpen: anyone who reaches the main listener (the default).
	MetricsOpen = "open"
	// MetricsAdminToken: the admin token, as a bearer or the Basic auth
	// password, as the status page takes it.
	MetricsAdminToken = "admin_token"
	// MetricsOpsListener: not on the main listener (404); only on the ops
	// listener.
	MetricsOpsListener = "ops_listener"
)

// defaultBlocks returns the mux blocks' defaults.
func defaultBlocks() (Guardrails, ToolSearch, Tasks, Store, Inbound) {
	return Guardrails{Enabled: true, FailClosed: true},
		ToolSearch{AutoPromoteTopK: 3},
		Tasks{
			PollInterval:                5 * time.Second,
			Lease:                       120 * time.Second,
			MaxConcurrentPolls:          8,
			MaxPollBackoff:              300 * time.Second,
			InputRequiredPollInterval:   60 * time.Second,
			TrackingDegradedAfterErrors: 3,
			MaxResultBytes:              65536,
			ResultPreviewMaxChars:       2000,
			MaxActiveTasksPerUser:       100,
			Retention:                   7 * 24 * time.Hour,
		},
		Store{KeyPrefix: "mcp-mux:", RedisMode: "standalone", WaitTimeout: time.Second},
		Inbound{
			Auth:               InboundAuth{Mode: AuthNone, UserClaim: "sub"},
			SecretsHeader:      "X-Mux-Secrets",
			ThreadHeader:       "X-Mux-Thread-Id",
			UserHeader:         "X-Mux-User",
			MaxSessions:        10000,
			MaxParkedCalls:     1024,
			SessionIdleTimeout: 1800 * time.Second,
		}
}

// muxBlocks are the readers of the mux blocks, in the order they are
// validated (which is the order of their problems).
var muxBlocks = []struct {
	key  string
	read func(c *Config, o *object)
}{
	{"guardrails", (*Config).parseGuardrails},
	{"tool_search", (*Config).parseToolSearch},
	{"mcp_tasks", (*Config).parseTasks},
	{"store", (*Config).parseStore},
	{"inbound", (*Config).parseInbound},
	{"admin", (*Config).parseAdmin},
	{"telemetry", (*Config).parseTelemetry},
	{"profiles", (*Config).parseProfiles},
	{"limits", (*Config).parseLimits},
	{"policy", (*Config).parsePolicy},
	{"approvals", (*Config).parseApprovals},
	{"result_guards", (*Config).parseResultGuardsBlock},
}

// parseMuxBlocks fills the mux-specific blocks. They are strict: unknown keys
// and type errors are returned as problems that fail the load.
func (c *Config) parseMuxBlocks(root *rawdoc.Node) []Problem {
	f := &findings{}
	c.Guardrails, c.ToolSearch, c.Tasks, c.Store, c.Inbound = defaultBlocks()
	c.Admin.Metrics = MetricsOpen
	c.Telemetry = Telemetry{Protocol: "http/protobuf", SampleRatio: 1, UserID: "hashed",
		Audit: Audit{Output: "stderr", MaxFileMB: 100, Detail: "standard", UserID: "hashed", SlowCall: time.Second}}
	for _, b := range muxBlocks {
		if o := objectAt(root.Get(b.key), b.key, f); o != nil {
			b.read(c, o)
			o.rejectUnknown()
		}
	}
	c.Processors = parseProcessors(root.Get("processors"), "processors", f)
	c.checkProfiles(f)
	c.checkAccounts()
	c.Warnings = append(c.Warnings, f.warnings...)
	return f.problems
}

// allowlistProvider is DeerFlow's built-in guardrail provider, the one
// "guardrails.provider.use" may name: its lists are mcp-mux's.
const allowlistProvider = "deerflow.guardrails.builtin:AllowlistProvider"

// parseGuardrails reads the "guardrails" block: the flat lists, or
// DeerFlow's form with the lists under provider.config. "passport"
// (DeerFlow's agent id for providers) is accepted; the lists do not use it.
func (c *Config) parseGuardrails(o *object) {
	g := &c.Guardrails
	g.Enabled = o.boolean("enabled", g.Enabled)
	g.FailClosed = o.boolean("fail_closed", g.FailClosed)
	o.str("passport", "")
	g.AllowedTools = o.strList("allowed_tools")
	g.DeniedTools = o.strList("denied_tools")
	p := objectAt(o.take("provider"), o.field("provider"), o.f)
	if p == nil {
		return
	}
	if use := p.str("use", allowlistProvider); use != allowlistProvider {
		o.f.problem(p.field("use"), "mcp-mux has only the built-in allow/deny lists (%s); '%s' is not available", allowlistProvider, use)
	}
	if pc := objectAt(p.take("config"), p.field("config"), o.f); pc != nil {
		providerList(o, pc, "allowed_tools", &g.AllowedTools)
		providerList(o, pc, "denied_tools", &g.DeniedTools)
		pc.rejectUnknown()
	}
	p.rejectUnknown()
}

// providerList reads one list of guardrails.provider.config into dst,
// which the flat form of the block may have set already.
func providerList(o, pc *object, key string, dst *[]string) {
	if !pc.has(key) {
		pc.take(key)
		return
	}
	if o.has(key) {
		o.f.problem(pc.field(key), "%s is also set at %s; set it in one place", key, o.field(key))
		pc.take(key)
		return
	}
	*dst = pc.strList(key)
}

// parseToolSearch reads the "tool_search" block; auto_promote_top_k is
// clamped to 1..5 with a warning.
func (c *Config) parseToolSearch(o *object) {
	t := &c.ToolSearch
	t.Enabled = o.boolean("enabled", false)
	t.AlwaysListed = alwaysListed(o)
	v, lit, ok := o.integer("auto_promote_top_k")
	if !ok {
		return
	}
	t.AutoPromoteTopK = int(min(max(v, 1), 5))
	if v < 1 || v > 5 {
		o.f.warn(o.field("auto_promote_top_k"), "auto_promote_top_k %s is outside 1..5; clamping to %d", lit, t.AutoPromoteTopK)
	}
}

// parseTasks reads the "mcp_tasks" block.
func (c *Config) parseTasks(o *object) {
	t := &c.Tasks
	t.Enabled = o.boolean("enabled", false)
	t.PollInterval = o.secondsInRange("poll_interval_seconds", t.PollInterval, 1, 300)
	t.Lease = o.secondsInRange("lease_seconds", t.Lease, 5, 3600)
	t.MaxConcurrentPolls = o.intInRange("max_concurrent_polls", t.MaxConcurrentPolls, 1, 64)
	t.MaxPollBackoff = o.secondsInRange("max_poll_backoff_seconds", t.MaxPollBackoff, 1, 3600)
	t.InputRequiredPollInterval = o.secondsInRange("input_required_poll_interval_seconds", t.InputRequiredPollInterval, 5, 3600)
	t.TrackingDegradedAfterErrors = o.intInRange("tracking_degraded_after_errors", t.TrackingDegradedAfterErrors, 1, 100)
	t.MaxResultBytes = o.intInRange("max_result_bytes", t.MaxResultBytes, 1024, 10485760)
	t.ResultPreviewMaxChars = o.intInRange("result_preview_max_chars", t.ResultPreviewMaxChars, 64, 100000)
	t.MaxActiveTasksPerUser = o.intInRange("max_active_tasks_per_user", t.MaxActiveTasksPerUser, 1, 100000)
	// Whole seconds, so that the range reads as 1..31536000 in a problem.
	t.Retention = time.Duration(o.intInRange("retention_seconds", int(t.Retention/time.Second), 1, 365*24*3600)) * time.Second
}

// parseStore reads the "store" block; the Redis URL is parsed as its mode
// says and never echoed (it usually carries a password).
func (c *Config) parseStore(o *object) {
	s := &c.Store
	s.RedisURL = o.secret("redis_url")
	s.KeyPrefix = o.str("key_prefix", s.KeyPrefix)
	s.RedisMode = o.oneOf("redis_mode", s.RedisMode, "standalone", "sentinel", "cluster")
	s.SentinelPassword = o.secret("sentinel_password")
	s.TLSCAFile = o.str("tls_ca_file", "")
	s.PoolSize = o.intInRange("pool_size", 0, 1, 10000)
	if s.RedisMode == "sentinel" {
		s.WaitReplicas = 1
	}
	s.WaitReplicas = o.intInRange("wait_replicas", s.WaitReplicas, 0, 5)
	s.WaitTimeout = time.Duration(o.intInRange("wait_timeout_ms", int(s.WaitTimeout/time.Millisecond), 10, 10000)) * time.Millisecond
	if s.RedisURL.IsZero() {
		return
	}
	if why := redisURLProblem(s.RedisMode, s.RedisURL.Reveal()); why != "" {
		o.f.problem("store.redis_url", "%s", why)
	}
	if !s.SentinelPassword.IsZero() && s.RedisMode != "sentinel" {
		o.f.problem(o.field("sentinel_password"), "is set but store.redis_mode is %q, not sentinel", s.RedisMode)
	}
}

// redisURLProblem says what is wrong with raw as a Redis URL in mode ("":
// nothing this check sees; go-redis parses the rest when serve starts),
// never quoting it.
func redisURLProblem(mode, raw string) string {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "must be a redis://, rediss:// or unix:// URL"
	case mode == "standalone" && u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix":
		return "must be a redis://, rediss:// or unix:// URL"
	case mode != "standalone" && u.Scheme != "redis" && u.Scheme != "rediss":
		return "must be a redis:// or rediss:// URL in " + mode + " mode"
	case u.Query().Has("skip_verify"):
		return "skip_verify turns certificate checks off; give store.tls_ca_file instead"
	case mode == "sentinel" && u.Query().Get("master_name") == "":
		return "needs master_name=<the primary's name> in sentinel mode"
	}
	return ""
}

// parseAdmin reads the "admin" block.
func (c *Config) parseAdmin(o *object) {
	c.Admin.Token = o.secret("token")
	if n := o.n.Get("token"); n != nil && n.Kind == rawdoc.String && n.Value == "" {
		// A configured token that is empty would leave the admin API off and
		// the status page open: fail closed instead.
		if name, isVar := strings.CutPrefix(n.Text, "$"); isVar {
			why := "is not set"
			if n.Unset == "" {
				why = "is empty"
			}
			o.f.problem(o.field("token"), "is empty because the environment variable %s %s; set it, or remove admin.token to turn the admin API off", name, why)
		} else {
			o.f.problem(o.field("token"), "must not be empty; set a token, or remove admin.token to turn the admin API off")
		}
	}
	c.Admin.AllowedEnv = o.strList("allowed_env")
	c.Admin.Metrics = o.oneOf("metrics", MetricsOpen, MetricsOpen, MetricsAdminToken, MetricsOpsListener)
	if c.Admin.Metrics == MetricsAdminToken && c.Admin.Token.IsZero() {
		o.f.problem(o.field("metrics"), "is %q but admin.token is not set; set one, or choose %q or %q", MetricsAdminToken, MetricsOpen, MetricsOpsListener)
	}
	for i, v := range c.Admin.AllowedEnv {
		if !isVarName(v) {
			o.f.problem(fmt.Sprintf("%s[%d]", o.field("allowed_env"), i), "must be an environment variable name (letters, digits and _, not starting with a digit)")
		}
	}
}

// parseTelemetry reads the "telemetry" block.
func (c *Config) parseTelemetry(o *object) {
	t := &c.Telemetry
	t.Enabled = o.boolean("enabled", false)
	t.Off = !t.Enabled && o.has("enabled")
	t.Endpoint = o.secret("endpoint")
	if !t.Endpoint.IsZero() {
		// Never echoed: a URL may carry credentials.
		if u, err := url.Parse(t.Endpoint.Reveal()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			o.f.problem(o.field("endpoint"), "must be an http:// or https:// URL")
		}
	}
	t.Protocol = o.str("protocol", t.Protocol)
	if t.Protocol != "http/protobuf" && t.Protocol != "grpc" {
		o.f.problem(o.field("protocol"), "must be \"http/protobuf\" or \"grpc\"")
	}
	if v, ok := o.number("sample_ratio"); ok {
		if v <= 0 || v > 1 {
			o.f.problem(o.field("sample_ratio"), "must be more than 0 and at most 1 (to trace nothing, leave telemetry off)")
		} else {
			t.SampleRatio = v
		}
	}
	t.TrustParent = o.boolean("trust_parent", false)
	t.UserID = o.oneOf("user_id", t.UserID, "hashed", "plain", "none")
	if a := objectAt(o.take("audit"), o.field("audit"), o.f); a != nil {
		t.Audit.parse(a)
		a.rejectUnknown()
	}
}

// parse reads the telemetry.audit block.
func (au *Audit) parse(o *object) {
	au.Enabled = o.boolean("enabled", false)
	au.Output = o.str("output", au.Output)
	if au.Output != "stderr" && au.Output != "stdout" && !filepath.IsAbs(au.Output) {
		o.f.problem(o.field("output"), "must be \"stderr\", \"stdout\" or an absolute file path")
	}
	au.MaxFileMB = o.intInRange("max_file_mb", au.MaxFileMB, 1, 1<<20)
	au.Detail = o.oneOf("detail", au.Detail, "minimal", "standard", "full")
	au.UserID = o.oneOf("user_id", au.UserID, "hashed", "plain", "none")
	au.SlowCall = o.secondsInRange("slow_call_seconds", au.SlowCall, 0.001, 3600)
}

// share reads one caller's share of the cap named capKey: 1..limit,
// default a quarter of it (at least 1).
func (o *object) share(key, capKey string, limit int) int {
	def := max(limit/4, 1)
	v, _, ok := o.integer(key)
	switch {
	case !ok:
		return def
	case v < 1 || v > float64(limit):
		o.f.problem(o.field(key), "must be between 1 and %s (%d)", o.field(capKey), limit)
		return def
	}
	return int(v)
}

// parseInbound reads the "inbound" block: the carrier headers, the DNS
// rebinding lists, the caps and their per-caller shares, the request state
// key and the auth block.
func (c *Config) parseInbound(o *object) {
	in := &c.Inbound
	o.headerName("secrets_header", &in.SecretsHeader)
	o.headerName("thread_header", &in.ThreadHeader)
	o.headerName("user_header", &in.UserHeader)
	in.AllowedHosts = o.strList("allowed_hosts")
	in.AllowedOrigins = o.strList("allowed_origins")
	in.MaxSessions = o.intInRange("max_sessions", in.MaxSessions, 1, 1000000)
	in.MaxParkedCalls = o.intInRange("max_parked_calls", in.MaxParkedCalls, 1, 100000)
	in.MaxSessionsPerUser = o.share("max_sessions_per_user", "max_sessions", in.MaxSessions)
	in.MaxListensPerUser = o.share("max_listens_per_user", "max_sessions", in.MaxSessions)
	in.MaxParkedCallsPerUser = o.share("max_parked_calls_per_user", "max_parked_calls", in.MaxParkedCalls)
	in.SessionIdleTimeout = o.secondsInRange("session_idle_timeout_seconds", in.SessionIdleTimeout, 1, 7*24*3600)
	in.RequestStateKey = o.secret("request_state_key")
	if n := len(in.RequestStateKey.Reveal()); n > 0 && n < 32 {
		o.f.problem(o.field("request_state_key"), "must be at least 32 bytes long (it is a key, not a password)")
	}
	if o.present("public_url") {
		in.PublicURL = publicURL(o.str("public_url", ""), o.field("public_url"), o.f)
	}
	if a := objectAt(o.take("auth"), o.field("auth"), o.f); a != nil {
		parseInboundAuth(a, &in.Auth)
		a.rejectUnknown()
	}
	in.parseProfileBy(o)
}

// publicURL checks inbound.public_url and returns it without a trailing
// slash: an absolute http(s) URL with no credentials, query or fragment.
func publicURL(s, field string, f *findings) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		f.problem(field, "must be an absolute http or https URL with no credentials, query or fragment (the base URL browsers reach mcp-mux at)")
		return ""
	}
	return strings.TrimRight(s, "/")
}

// checkAccounts makes connected-account servers (oauth grant_type
// authorization_code) invalid when inbound.public_url, which their
// redirect URI is made of, is not set: the other servers are served.
func (c *Config) checkAccounts() {
	if c.Inbound.PublicURL != "" {
		return
	}
	kept := c.Servers[:0]
	for _, s := range c.Servers {
		if s.Type == TypeStdio || !s.OAuth.PerUser() {
			kept = append(kept, s)
			continue
		}
		c.Invalid = append(c.Invalid, ServerError{Name: s.Name, Problems: []Problem{{Server: s.Name, Field: "oauth.grant_type",
			Message: "authorization_code needs inbound.public_url: the base URL users' browsers reach mcp-mux at (the redirect URI is <public_url>/oauth/callback)"}}})
	}
	c.Servers = kept
}

// headerName reads an optional header name into dst (which holds the
// default), checking that it is a valid name.
func (o *object) headerName(key string, dst *string) {
	if !o.present(key) {
		return
	}
	*dst = o.str(key, *dst)
	if err := headercheck.CheckName(*dst); err != nil {
		o.f.problem(o.field(key), "%v", err)
	}
}

// parseInboundAuth reads "inbound.auth" into auth and checks what its mode
// requires.
func parseInboundAuth(a *object, auth *InboundAuth) {
	auth.Mode = a.oneOf("mode", AuthNone, AuthNone, AuthTrustedHeader, AuthAPIKeys, AuthJWT)
	auth.AllowRemote = a.boolean("allow_remote", false)
	if entries, ok := a.strMap("keys"); ok {
		auth.Keys = secretMap(entries)
		if auth.Mode == AuthAPIKeys {
			checkAPIKeys(a, entries)
		}
	}
	auth.JWKSURL = a.str("jwks_url", "")
	auth.Issuer = a.str("issuer", "")
	auth.Audience = a.str("audience", "")
	auth.UserClaim = a.str("user_claim", auth.UserClaim)
	switch auth.Mode {
	case AuthAPIKeys:
		if len(auth.Keys) == 0 {
			a.f.problem(a.field("keys"), "api_keys mode requires at least one key")
		}
	case AuthJWT:
		checkJWT(a, auth)
	}
}

// checkAPIKeys refuses empty API keys: an empty key must never
// authenticate anyone.
func checkAPIKeys(a *object, entries []entry) {
	for _, e := range entries {
		if e.val == "" {
			a.f.problem(join(a.field("keys"), e.key), "API key must not be empty (is its environment variable set?)")
		}
	}
}

// checkJWT requires jwt mode's settings: an http(s) jwks_url, an issuer,
// an audience and a user claim.
func checkJWT(a *object, auth *InboundAuth) {
	if auth.JWKSURL == "" {
		a.f.problem(a.field("jwks_url"), "jwt mode requires jwks_url")
	} else {
		checkHTTPURL(auth.JWKSURL, a.field("jwks_url"), a.f)
	}
	for _, k := range []struct{ key, val string }{{"issuer", auth.Issuer}, {"audience", auth.Audience}, {"user_claim", auth.UserClaim}} {
		if strings.TrimSpace(k.val) == "" {
			a.f.problem(a.field(k.key), "jwt mode requires %s", k.key)
		}
	}
}

// varNameChars are the characters of a portable environment variable name.
const varNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"

// isVarName reports whether s is a portable environment variable name:
// varNameChars, not starting with a digit.
func isVarName(s string) bool {
	return s != "" && (s[0] < '0' || s[0] > '9') && strings.Trim(s, varNameChars) == ""
}
