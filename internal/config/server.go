package config

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcp-mux/mcp-mux/internal/headercheck"
	"github.com/mcp-mux/mcp-mux/internal/secret"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
)

// Transport types.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http" // Streamable HTTP
	TypeSSE   = "sse"  // legacy HTTP+SSE
)

// Session scopes: which downstream callers share one upstream session.
const (
	ScopeThread = "thread" // one session per (server, user, thread); the default
	ScopeUser   = "user"   // one session per (server, user)
	ScopeShared = "shared" // one session per server
)

// Routing modes.
const (
	RoutingOff    = "off"
	RoutingPrefer = "prefer"
)

// On-missing policies of user_auth and headers_from_context.
const (
	OnMissingDeny        = "deny"
	OnMissingPassthrough = "passthrough"
)

// Modes of a server's pin_tools (package toolpin).
const (
	PinOff   = "off"   // tool definitions are not pinned (the default)
	PinWarn  = "warn"  // a changed definition is logged, counted and listed; the new one is served
	PinBlock = "block" // a changed definition is listed; the pinned one is served and calls refused until accepted
)

// DefaultSessionInitTimeout bounds discovery and session start-up when a
// server does not set session_init_timeout (DeerFlow's default).
const DefaultSessionInitTimeout = 60 * time.Second

// Server is one valid mcpServers entry after $VAR expansion and defaults.
type Server struct {
	// Name is the mcpServers key.
	Name    string
	Enabled bool
	// Type is TypeStdio, TypeHTTP or TypeSSE ("transport" is an alias).
	Type string

	// stdio
	Command string
	Args    []string
	Env     map[string]secret.Value
	// Cwd is the working directory of the server's processes: an existing
	// directory, absolute (a relative "cwd" is taken from the config
	// file's directory); "" for mcp-mux's own.
	Cwd string

	// http, sse. Header names keep their original spellings.
	URL     string
	Headers map[string]secret.Value

	OAuth              *OAuth
	UserAuth           *UserAuth
	HeadersFromContext *HeadersFromContext
	TokenExchange      *TokenExchange

	Description string
	// Routing is the server's effective routing (default mode "off", priority 0).
	Routing Routing
	// Tools holds per-tool overrides keyed by the raw upstream tool name.
	Tools map[string]ToolOverride
	// ToolNamePrefix makes visible tool names "<server>_<tool>" (default true).
	ToolNamePrefix bool
	// SessionInitTimeout bounds discovery and session start-up; 0 means no
	// limit (null in the file). Default DefaultSessionInitTimeout.
	SessionInitTimeout time.Duration
	// ToolCallTimeout bounds one tool call; 0 (the default, null) means no limit.
	ToolCallTimeout time.Duration
	TaskToolsets    []TaskToolset
	// SessionScope is ScopeThread (default), ScopeUser or ScopeShared.
	SessionScope string
	// ProtocolVersion pins an http or stdio server's protocol era:
	// "2025-11-25" or "2026-07-28"; "auto" (the default) negotiates. sse
	// servers speak 2025-11-25.
	ProtocolVersion string
	// MaxSessions caps the server's pooled upstream sessions (for stdio:
	// processes), busy or not; default 16 for stdio, 256 for http and sse.
	MaxSessions int
	// IdleTimeout closes a pooled session unused this long; default 300s
	// for stdio, 600s for http and sse.
	IdleTimeout time.Duration
	// Telemetry is what the server lets spans and audit records carry of
	// its calls (its "telemetry" object; nothing by default).
	Telemetry ServerTelemetry
	// Processors are the server's own external processors
	// (config/processors.go), asked after the top level's.
	Processors []Processor
	// ResultGuards is the server's "result_guards" object, which replaces
	// the top-level block for its tools (nil: the top-level one applies).
	ResultGuards *ResultGuards
	// PinTools is PinOff (default), PinWarn or PinBlock: what a change of
	// a tool's definition after mcp-mux first saw it does.
	PinTools string

	// Extra holds unknown server keys (e.g. Cline's "autoApprove")
	// verbatim, as written before $VAR expansion.
	Extra map[string]json.RawMessage
	// Raw is the server's object as written in the file, before $VAR
	// expansion (compact JSON, keys in file order), for round-tripping.
	Raw json.RawMessage
}

// ServerTelemetry is a server's opt-in to recording call content, always
// redacted (secret.RedactJSON) and size-bounded.
type ServerTelemetry struct {
	// Arguments: tool arguments in audit records (detail "full") and as
	// the gen_ai.tool.call.arguments span attribute.
	Arguments bool
	// Results: tool results as the gen_ai.tool.call.result span attribute.
	Results bool
}

// parseServerTelemetry reads a server's "telemetry" object.
func parseServerTelemetry(o *object) ServerTelemetry {
	var st ServerTelemetry
	if t := objectAt(o.take("telemetry"), "telemetry", o.f); t != nil {
		st = ServerTelemetry{Arguments: t.boolean("arguments", false), Results: t.boolean("results", false)}
		t.rejectUnknown()
	}
	return st
}

// Routing is routing metadata for a server or tool: hints that steer an agent
// towards the tool when a request mentions one of the keywords.
type Routing struct {
	// Mode is RoutingOff or RoutingPrefer.
	Mode string
	// Priority orders hints, 0..100.
	Priority int
	Keywords []string
}

// ToolOverride is one entry of a server's "tools" map.
type ToolOverride struct {
	// Routing holds the explicitly set routing fields, or nil.
	Routing *RoutingOverride
	// Presentation is how the tool is shown and what the mux fills in
	// (tooloverride.go).
	Presentation
	// Extra holds the entry's other keys verbatim.
	Extra map[string]json.RawMessage
}

// RoutingOverride holds only the routing fields a tool override sets.
type RoutingOverride struct {
	Mode     *string
	Priority *int
	Keywords []string
	// KeywordsSet reports whether keywords was given (possibly empty).
	KeywordsSet bool
}

// ToolRouting returns the effective routing of the raw tool name: the
// server's routing updated with the explicitly set fields of the tool's
// override. A tool override that sets only keywords inherits mode "off".
func (s *Server) ToolRouting(raw string) Routing {
	r := s.Routing
	r.Keywords = slices.Clone(r.Keywords)
	ov, ok := s.Tools[raw]
	if !ok || ov.Routing == nil {
		return r
	}
	if ov.Routing.Mode != nil {
		r.Mode = *ov.Routing.Mode
	}
	if ov.Routing.Priority != nil {
		r.Priority = *ov.Routing.Priority
	}
	if ov.Routing.KeywordsSet {
		r.Keywords = slices.Clone(ov.Routing.Keywords)
	}
	return r
}

// TaskToolset names the submit/status/cancel tools (raw names) of one
// durable-task contract.
type TaskToolset struct {
	Name, SubmitTool, StatusTool, CancelTool string
}

// OAuth is a server's "oauth" block (DeerFlow semantics, plus auth_style).
type OAuth struct {
	Enabled bool
	// TokenURL may be empty: it is then discovered from the server.
	TokenURL string
	// GrantType is "client_credentials" (default), "refresh_token" or
	// "authorization_code" (each caller connects their own account: the
	// connected accounts of DESIGN §2.9).
	GrantType        string
	ClientID         string
	ClientSecret     secret.Value
	RefreshToken     secret.Value
	Scope, Audience  string
	TokenField       string // default "access_token"
	TokenTypeField   string // default "token_type"
	ExpiresInField   string // default "expires_in"
	DefaultTokenType string // default "Bearer"
	// RefreshSkew refreshes a token this long before it expires (default 60s).
	RefreshSkew      time.Duration
	ExtraTokenParams map[string]secret.Value
	// AuthStyle is how client credentials are sent: "auto" (default),
	// "basic" (HTTP Basic) or "post" (form body).
	AuthStyle string
	// ClientMetadataURL (authorization_code) is the https URL of the
	// client's Client ID Metadata Document, used as its client_id where the
	// authorization server supports them; empty: the mux's own document.
	ClientMetadataURL string
	// AuthorizationURL (authorization_code) overrides the discovered
	// authorization endpoint.
	AuthorizationURL string
	// Extra holds unknown keys verbatim.
	Extra map[string]json.RawMessage
}

// UserAuth is a server's "user_auth" block: a credential per
// caller, sent in one header.
type UserAuth struct {
	Enabled bool
	// Header is the header the credential is sent in (default "Authorization").
	Header string
	// Users maps a user id to the full header value.
	Users map[string]secret.Value
	// OnMissing is OnMissingDeny (default) or OnMissingPassthrough.
	OnMissing string
	Extra     map[string]json.RawMessage
	// Ignored is set on stdio servers, where the block has no effect.
	Ignored bool
}

// HeadersFromContext is a server's "headers_from_context" block: headers
// filled per request from the inbound secrets carrier.
type HeadersFromContext struct {
	Enabled bool
	// Headers maps an HTTP header name to a key of the inbound secrets.
	Headers map[string]string
	// OnMissing is OnMissingDeny (default) or OnMissingPassthrough.
	OnMissing string
	Extra     map[string]json.RawMessage
	// Ignored is set on stdio servers, where the block has no effect.
	Ignored bool
}

// toolNameChars are the characters the catalog accepts in visible tool
// names.
const toolNameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"

// isToolNameSafe reports whether name only uses toolNameChars.
func isToolNameSafe(name string) bool { return strings.Trim(name, toolNameChars) == "" }

// serverResult is what validating one server found.
type serverResult struct {
	problems, warnings []Problem
}

// result returns the findings as a serverResult.
func (f *findings) result() serverResult { return serverResult{f.problems, f.warnings} }

// parseServer validates one mcpServers entry. The server is invalid when
// res.problems is non-empty. Its steps run in a fixed order, which is the
// order of the problems and warnings reported.
func parseServer(name string, n *rawdoc.Node) (*Server, serverResult) {
	f := &findings{server: name}
	if strings.TrimSpace(name) == "" {
		f.problem("", "server name must not be empty")
	}
	if n.Kind != rawdoc.Object {
		f.problem("", "must be an object, not %s", kindName(n.Kind))
		return nil, f.result()
	}
	o := objectAt(n, "", f)
	s := &Server{Name: name, Raw: n.JSON()}
	s.readTransport(o)
	s.readSettings(o)
	s.checkTransport(f, unsetVar(o, "command"), unsetVar(o, "url"))
	s.readHeaders(o)
	s.OAuth = parseOAuth(o.take("oauth"), f)
	s.UserAuth = parseUserAuth(o.take("user_auth"), f)
	s.HeadersFromContext = parseHeadersFromContext(o.take("headers_from_context"), f)
	s.TokenExchange = parseTokenExchange(o.take("token_exchange"), f)
	s.readRouting(o)
	s.Telemetry = parseServerTelemetry(o)
	s.Processors = parseProcessors(o.take("processors"), "processors", f)
	s.ResultGuards = parseServerResultGuards(o)
	s.Extra = o.extras()
	warnNearMisses(n.Keys, s.Extra, f)
	s.crossCheck(f)
	if len(f.problems) > 0 {
		return nil, f.result()
	}
	return s, f.result()
}

// readTransport reads how the server is reached: enabled, type, command,
// args, env (warning about unset variables), url and cwd.
func (s *Server) readTransport(o *object) {
	s.Enabled = o.boolean("enabled", true)
	s.Type = serverType(o)
	s.Command = o.str("command", "")
	s.Args = o.strList("args")
	if entries, ok := o.strMap("env"); ok {
		s.Env = secretMap(entries)
		for _, e := range entries {
			if e.unsetVar != "" {
				// DeerFlow passes "" for an unset variable; so does mcp-mux, with a word.
				o.f.warn(join("env", e.key), "$%s is not set; the server gets an empty %s", e.unsetVar, e.key)
			}
		}
	}
	s.URL = o.str("url", "")
	s.readCwd(o)
}

// readSettings reads the description, naming, timeouts, session scope,
// protocol era and pool bounds (whose defaults depend on the type).
func (s *Server) readSettings(o *object) {
	s.Description = o.str("description", "")
	s.ToolNamePrefix = o.boolean("tool_name_prefix", true)
	s.SessionInitTimeout = o.timeout("session_init_timeout", DefaultSessionInitTimeout)
	s.ToolCallTimeout = o.timeout("tool_call_timeout", 0)
	s.SessionScope = o.oneOf("session_scope", ScopeThread, ScopeThread, ScopeUser, ScopeShared)
	s.PinTools = o.oneOf("pin_tools", PinOff, PinOff, PinWarn, PinBlock)
	s.ProtocolVersion = o.oneOf("protocol_version", "auto", "auto", "2025-11-25", "2026-07-28")
	if s.ProtocolVersion == "2026-07-28" && s.Type == TypeSSE {
		o.f.problem(o.field("protocol_version"), "sse servers speak 2025-11-25 (the legacy SSE transport predates 2026-07-28); use type http for a 2026-07-28 server")
	}
	defMax, defIdle := 256, 600*time.Second
	if s.Type == TypeStdio {
		defMax, defIdle = 16, 300*time.Second
	}
	s.MaxSessions = o.intInRange("max_sessions", defMax, 1, 100000)
	s.IdleTimeout = o.secondsInRange("idle_timeout_seconds", defIdle, 1, 86400)
}

// remote reports whether the server is reached over HTTP (http or sse).
func (s *Server) remote() bool { return s.Type == TypeHTTP || s.Type == TypeSSE }

// checkTransport requires a command of a stdio server and an absolute
// http(s) url of a remote one. commandVar and urlVar name the unset
// variable a missing command or url came from, if any.
func (s *Server) checkTransport(f *findings, commandVar, urlVar string) {
	switch {
	case s.Type == TypeStdio && s.Command == "":
		f.problem("command", "stdio transport requires 'command' field%s", fromUnset(commandVar))
	case !s.remote():
	case s.URL == "":
		f.problem("url", "%s transport requires 'url' field%s", s.Type, fromUnset(urlVar))
	default:
		checkHTTPURL(s.URL, "url", f)
	}
}

// unsetVar returns the name of the unset variable key's string value was
// written as ("$NAME"), or "".
func unsetVar(o *object, key string) string {
	if n := o.n.Get(key); n != nil && n.Kind == rawdoc.String {
		return n.Unset
	}
	return ""
}

// fromUnset says where an empty required value came from: the unset
// variable name (never a value), or nothing.
func fromUnset(name string) string {
	if name == "" {
		return ""
	}
	return "; it comes from $" + name + ", which is not set"
}

// readHeaders reads the static headers; on a remote server each name and
// value must be sendable, and a header from an unset variable invalidates
// an enabled server.
func (s *Server) readHeaders(o *object) {
	entries, ok := o.strMap("headers")
	if !ok {
		return
	}
	checkSpellings(entries, "headers", "headers", o.f)
	if s.remote() {
		for _, e := range entries {
			s.checkHeader(e, o.f)
		}
	}
	s.Headers = secretMap(entries)
}

// checkHeader reports the first problem of one static header.
func (s *Server) checkHeader(e entry, f *findings) {
	if err := headercheck.CheckName(e.key); err != nil {
		f.problem(join("headers", e.key), "%v", err)
	} else if e.unsetVar != "" && s.Enabled {
		// DeerFlow would send an empty credential; a server that
		// needs one is better skipped with the reason.
		f.problem(join("headers", e.key), "header %s comes from $%s, which is not set", quote(e.key), e.unsetVar)
	} else if err := headercheck.CheckValue(e.val); err != nil {
		f.problem(join("headers", e.key), "header %s value %v", quote(e.key), err)
	}
}

// readRouting reads the routing hints, the per-tool overrides and the
// task toolsets, whose server name must suit an MCP task server.
func (s *Server) readRouting(o *object) {
	s.Routing = Routing{Mode: RoutingOff}
	if r := parseRouting(o.take("routing"), "routing", o.f); r != nil {
		s.Routing = r.Apply(s.Routing)
	}
	s.Tools = parseTools(o.take("tools"), o.f)
	s.TaskToolsets = parseTaskToolsets(o.take("task_toolsets"), o.f)
	if len(s.TaskToolsets) == 0 {
		return
	}
	if n := utf8.RuneCountInString(s.Name); n < 1 || n > 128 || strings.TrimSpace(s.Name) == "" {
		o.f.problem("task_toolsets", "MCP task server name must contain 1 to 128 characters")
	}
}

// warnNearMisses warns about the unknown keys (kept in extra) that look
// like a misspelled server key, in file order.
func warnNearMisses(keys []string, extra map[string]json.RawMessage, f *findings) {
	for _, k := range keys {
		if _, ok := extra[k]; !ok {
			continue
		}
		if lk := likelyKey(k, serverKeys); lk != "" {
			f.warn(k, "unknown key, kept but not used; did you mean %q?", lk)
		}
	}
}

// crossCheck gives the warnings that depend on several fields: blocks a
// stdio server ignores, request headers task polls do not send, and a
// name that cannot prefix tool names.
func (s *Server) crossCheck(f *findings) {
	if s.Type == TypeStdio {
		s.ignoreRemoteBlocks(f)
	} else if s.sendsContextHeaders() && len(s.TaskToolsets) > 0 {
		f.warn("headers_from_context", "headers_from_context headers are sent with task submit calls only; status and cancel polls use the static and OAuth credentials")
	}
	if s.Type != TypeStdio && s.TokenExchange != nil && s.TokenExchange.Enabled && len(s.TaskToolsets) > 0 {
		f.warn("token_exchange", "exchanged tokens are sent with task submit calls only; status and cancel polls use the static and OAuth credentials")
	}
	if s.ToolNamePrefix && s.Name != "" && !isToolNameSafe(s.Name) {
		f.warn("", "server name has characters outside [A-Za-z0-9_-], so its prefixed tool names are invalid and its tools will be dropped; rename it or set tool_name_prefix to false")
	}
}

// sendsContextHeaders reports whether an enabled headers_from_context
// block maps at least one header.
func (s *Server) sendsContextHeaders() bool {
	h := s.HeadersFromContext
	return h != nil && h.Enabled && len(h.Headers) > 0
}

// ignoreRemoteBlocks marks a stdio server's user_auth and
// headers_from_context as ignored, warning when they are enabled.
func (s *Server) ignoreRemoteBlocks(f *findings) {
	if s.UserAuth != nil {
		s.UserAuth.Ignored = true
		if s.UserAuth.Enabled {
			f.warn("user_auth", "user-scoped credentials only apply to 'sse'/'http' servers; user_auth is ignored for this stdio server")
		}
	}
	if s.TokenExchange != nil {
		s.TokenExchange.Ignored = true
		if s.TokenExchange.Enabled {
			f.warn("token_exchange", "token exchange only applies to 'sse'/'http' servers; token_exchange is ignored for this stdio server")
		}
	}
	if s.HeadersFromContext != nil {
		s.HeadersFromContext.Ignored = true
		if s.HeadersFromContext.Enabled {
			f.warn("headers_from_context", "request-scoped headers only apply to 'sse'/'http' servers; headers_from_context is ignored for this stdio server")
		}
	}
}

// serverType applies DeerFlow's alias rule: "type" wins when set and
// non-empty, else "transport", else stdio.
func serverType(o *object) string {
	typ := o.str("type", "")
	field := "type"
	if typ == "" {
		if t := o.str("transport", ""); t != "" {
			typ, field = t, "transport"
		}
	} else {
		o.take("transport")
	}
	if typ == "" {
		return TypeStdio
	}
	switch typ {
	case TypeStdio, TypeHTTP, TypeSSE:
		return typ
	}
	o.f.problem(field, "unsupported transport type: %s", quoteValue(typ))
	return typ
}

// quoteValue shows a non-secret value (a transport type) safely.
func quoteValue(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// checkSpellings reports header names given under two spellings, in DeerFlow's words.
func checkSpellings(entries []entry, field, label string, f *findings) {
	first := map[string]string{}
	for _, e := range entries {
		lower := strings.ToLower(e.key)
		if prev, ok := first[lower]; ok {
			f.problem(field, "%s maps the same HTTP header under two spellings (%s and %s); header names are case-insensitive, so keep only one", label, quote(prev), quote(e.key))
			continue
		}
		first[lower] = e.key
	}
}

// parseOAuth reads a server's "oauth" block, or returns nil when absent.
func parseOAuth(n *rawdoc.Node, f *findings) *OAuth {
	o := objectAt(n, "oauth", f)
	if o == nil {
		return nil
	}
	a := &OAuth{
		Enabled:           o.boolean("enabled", true),
		TokenURL:          o.str("token_url", ""),
		GrantType:         o.oneOf("grant_type", "client_credentials", "client_credentials", "refresh_token", GrantAuthorizationCode),
		ClientID:          o.str("client_id", ""),
		ClientSecret:      o.secret("client_secret"),
		RefreshToken:      o.secret("refresh_token"),
		Scope:             o.str("scope", ""),
		Audience:          o.str("audience", ""),
		TokenField:        o.str("token_field", "access_token"),
		TokenTypeField:    o.str("token_type_field", "token_type"),
		ExpiresInField:    o.str("expires_in_field", "expires_in"),
		DefaultTokenType:  o.str("default_token_type", "Bearer"),
		RefreshSkew:       60 * time.Second,
		AuthStyle:         o.oneOf("auth_style", "auto", "auto", "basic", "post"),
		ClientMetadataURL: o.str("client_metadata_url", ""),
		AuthorizationURL:  o.str("authorization_url", ""),
	}
	if skew, ok := o.number("refresh_skew_seconds"); ok {
		// DeerFlow uses max(refresh_skew_seconds, 0).
		a.RefreshSkew = time.Duration(min(max(skew, 0), 86400) * float64(time.Second))
	}
	if entries, ok := o.strMap("extra_token_params"); ok {
		a.ExtraTokenParams = secretMap(entries)
	}
	if a.TokenURL != "" {
		checkHTTPURL(a.TokenURL, "oauth.token_url", f)
	}
	if a.AuthorizationURL != "" {
		checkHTTPURL(a.AuthorizationURL, "oauth.authorization_url", f)
	}
	if a.ClientMetadataURL != "" {
		checkClientMetadataURL(a.ClientMetadataURL, f)
	}
	if a.Enabled {
		checkGrant(o, a.GrantType)
	}
	a.Extra = o.extras()
	return a
}

// GrantAuthorizationCode is the OAuth grant of connected accounts: every
// caller authorizes mcp-mux to act as them.
const GrantAuthorizationCode = "authorization_code"

// PerUser reports whether the block connects each caller's own account
// (an enabled authorization_code grant).
func (a *OAuth) PerUser() bool {
	return a != nil && a.Enabled && a.GrantType == GrantAuthorizationCode
}

// checkClientMetadataURL checks a Client ID Metadata Document URL: https
// with a path (the document's URL is the client_id), no fragment.
func checkClientMetadataURL(s string, f *findings) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" || u.Fragment != "" || u.User != nil {
		f.problem("oauth.client_metadata_url", "must be an https URL with a path and no fragment or credentials (it is the client_id)")
	}
}

// grantRequires lists the keys each OAuth grant type requires, with the
// problem reported for a missing one.
var grantRequires = map[string]struct {
	keys []string
	msg  string
}{
	"client_credentials": {[]string{"client_id", "client_secret"}, "OAuth client_credentials requires client_id and client_secret"},
	"refresh_token":      {[]string{"refresh_token"}, "OAuth refresh_token grant requires refresh_token"},
}

// checkGrant reports the keys grant requires that the block lacks.
// Presence is checked here; an empty value after $VAR expansion is allowed
// and fails when a token is fetched, as in DeerFlow.
func checkGrant(o *object, grant string) {
	req := grantRequires[grant]
	for _, k := range req.keys {
		if !o.has(k) {
			o.f.problem(o.field(k), "%s", req.msg)
		}
	}
}

// parseUserAuth reads a server's "user_auth" block, or returns nil when
// absent.
func parseUserAuth(n *rawdoc.Node, f *findings) *UserAuth {
	o := objectAt(n, "user_auth", f)
	if o == nil {
		return nil
	}
	u := &UserAuth{
		Enabled:   o.boolean("enabled", true),
		Header:    o.str("header", "Authorization"),
		OnMissing: o.oneOf("on_missing", OnMissingDeny, OnMissingDeny, OnMissingPassthrough),
	}
	if strings.TrimSpace(u.Header) == "" {
		f.problem(o.field("header"), "user_auth.header must not be empty")
	} else if err := headercheck.CheckName(u.Header); err != nil {
		f.problem(o.field("header"), "%v", err)
	}
	if entries, ok := o.strMap("users"); ok {
		u.Users = secretMap(entries)
	}
	u.Extra = o.extras()
	return u
}

// parseHeadersFromContext reads a server's "headers_from_context" block,
// or returns nil when absent.
func parseHeadersFromContext(n *rawdoc.Node, f *findings) *HeadersFromContext {
	o := objectAt(n, "headers_from_context", f)
	if o == nil {
		return nil
	}
	h := &HeadersFromContext{
		Enabled:   o.boolean("enabled", true),
		OnMissing: o.oneOf("on_missing", OnMissingDeny, OnMissingDeny, OnMissingPassthrough),
	}
	if hn := o.take("headers"); hn != nil {
		h.Headers = contextHeaders(hn, o.field("headers"), f)
	}
	h.Extra = o.extras()
	return h
}

// contextHeaders reads the header → secret key map of
// headers_from_context at path, keeping the valid entries.
func contextHeaders(hn *rawdoc.Node, path string, f *findings) map[string]string {
	if hn.Kind != rawdoc.Object {
		f.problem(path, "must be an object mapping header names to secret keys, not %s", kindName(hn.Kind))
		return nil
	}
	headers := make(map[string]string, len(hn.Keys))
	var entries []entry
	for i, name := range hn.Keys {
		if !contextHeaderOK(name, hn.Vals[i], path, f) {
			continue
		}
		entries = append(entries, entry{key: name, val: hn.Vals[i].Value})
		headers[name] = hn.Vals[i].Value
	}
	checkSpellings(entries, path, "headers_from_context.headers", f)
	return headers
}

// contextHeaderOK reports whether one entry of headers_from_context.headers
// is a valid header name mapped to a non-blank secret key, and records the
// problem when it is not.
func contextHeaderOK(name string, v *rawdoc.Node, path string, f *findings) bool {
	switch {
	case strings.TrimSpace(name) == "":
		f.problem(path, "headers_from_context.headers must not contain a blank header name")
		return false
	case v.Kind != rawdoc.String || strings.TrimSpace(v.Value) == "":
		f.problem(join(path, name), "headers_from_context.headers[%s] must name a non-blank key of the request's secrets (the inbound.secrets_header object)", quote(name))
		return false
	}
	if err := headercheck.CheckName(name); err != nil {
		f.problem(join(path, name), "%v", err)
		return false
	}
	return true
}

// Apply returns base updated with the explicitly set fields.
func (r *RoutingOverride) Apply(base Routing) Routing {
	if r.Mode != nil {
		base.Mode = *r.Mode
	}
	if r.Priority != nil {
		base.Priority = *r.Priority
	}
	if r.KeywordsSet {
		base.Keywords = r.Keywords
	}
	return base
}

// parseRouting reads a strict routing object, keeping only the fields set.
func parseRouting(n *rawdoc.Node, path string, f *findings) *RoutingOverride {
	o := objectAt(n, path, f)
	if o == nil {
		return nil
	}
	r := &RoutingOverride{}
	if o.present("mode") {
		if m := o.oneOf("mode", "", RoutingOff, RoutingPrefer); m != "" {
			r.Mode = &m
		}
	}
	r.Priority = routingPriority(o)
	if o.present("keywords") {
		r.Keywords = o.strList("keywords")
		r.KeywordsSet = true
	}
	o.rejectUnknown()
	return r
}

// routingPriority reads a routing priority, clamped to 0..100 with a
// warning; nil when absent or invalid.
func routingPriority(o *object) *int {
	v, lit, ok := o.integer("priority")
	if !ok {
		return nil
	}
	p := int(min(max(v, 0), 100))
	switch {
	case v < 0:
		o.f.warn(o.field("priority"), "MCP routing priority %s is below 0; clamping to 0.", lit)
	case v > 100:
		o.f.warn(o.field("priority"), "MCP routing priority %s is above 100; clamping to 100.", lit)
	}
	return &p
}

// parseTools reads a server's per-tool overrides, keyed by raw tool name.
func parseTools(n *rawdoc.Node, f *findings) map[string]ToolOverride {
	if n == nil {
		return nil
	}
	if n.Kind != rawdoc.Object {
		f.problem("tools", "must be an object keyed by raw tool name, not %s", kindName(n.Kind))
		return nil
	}
	out := make(map[string]ToolOverride, len(n.Keys))
	for i, raw := range n.Keys {
		path := join("tools", raw)
		o := objectAt(n.Vals[i], path, f)
		if o == nil {
			continue
		}
		out[raw] = ToolOverride{
			Routing:      parseRouting(o.take("routing"), o.field("routing"), f),
			Presentation: parsePresentation(o),
			Extra:        o.extras(),
		}
	}
	uniqueExposedNames(n.Keys, out, f)
	return out
}

// parseTaskToolsets reads a server's task_toolsets list; a raw tool may
// play one role in one toolset only.
func parseTaskToolsets(n *rawdoc.Node, f *findings) []TaskToolset {
	if n == nil {
		return nil
	}
	if n.Kind != rawdoc.Array {
		f.problem("task_toolsets", "must be a list, not %s", kindName(n.Kind))
		return nil
	}
	var out []TaskToolset
	roleOf := map[string]string{} // raw tool name → "toolset.role"
	for i, item := range n.Items {
		path := fmt.Sprintf("task_toolsets[%d]", i)
		o := objectAt(item, path, f)
		if o == nil {
			if item.Kind == rawdoc.Null {
				f.problem(path, "must be an object")
			}
			continue
		}
		out = append(out, parseTaskToolset(o, roleOf))
	}
	return out
}

// parseTaskToolset reads one strict task_toolsets entry, recording in
// roleOf where each of its tools is used.
func parseTaskToolset(o *object, roleOf map[string]string) TaskToolset {
	t := TaskToolset{Name: o.str("name", "")}
	switch {
	case strings.TrimSpace(t.Name) == "":
		o.f.problem(o.field("name"), "MCP task toolset name must not be empty")
	case utf8.RuneCountInString(t.Name) > 255:
		o.f.problem(o.field("name"), "MCP task toolset name must contain at most 255 characters")
	}
	t.SubmitTool = o.taskTool("submit_tool", t.Name, roleOf)
	t.StatusTool = o.taskTool("status_tool", t.Name, roleOf)
	t.CancelTool = o.taskTool("cancel_tool", t.Name, roleOf)
	o.rejectUnknown()
	return t
}

// taskTool reads the raw tool of one role (key) of toolset, which must be
// set and not play another role (roleOf: raw tool → "toolset.role").
func (o *object) taskTool(key, toolset string, roleOf map[string]string) string {
	tool := o.str(key, "")
	if tool == "" {
		o.f.problem(o.field(key), "must name a raw tool")
		return tool
	}
	where := toolset + "." + key
	if prev, ok := roleOf[tool]; ok {
		o.f.problem(o.field(key), "MCP task tool %s must be unique across task_toolsets and roles; it is configured as both %s and %s", quote(tool), prev, where)
		return tool
	}
	roleOf[tool] = where
	return tool
}
