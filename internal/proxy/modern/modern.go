package modern

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The 2026-07-28 era on /mcp.
//
// One endpoint serves both protocol eras. go-sdk serves 2026-07-28 only from
// a stateless handler and legacy sessions only from a stateful one, so
// Is routes each POST before either sees it: a 2026-07-28
// MCP-Protocol-Version header (or, without one, a body whose _meta names a
// protocol version) goes to the stateless handler; initialize, an
// Mcp-Session-Id, GET and DELETE go to the stateful one, as before.
//
// Both handlers share one mcp.Server and so one receiving middleware. A
// modern request has no mcp-mux session: Receive builds a throwaway one
// from the request (its user, declared capabilities and log level) and the
// same dispatch serves it, so a modern tools/call takes the legacy call path.
// What differs lives here: server/discover, subscriptions/listen, results
// marked complete and cacheable, and lists that never depend on earlier
// calls (no tool_search promotions).

// modernVersion is the protocol revision of the sessionless era.
const modernVersion = "2026-07-28"

// requestIDHeader carries a modern request's JSON-RPC id from the router to
// the middleware, which the SDK does not expose (subscriptions/listen names
// its notifications by it). Like userHeader it is set by mcp-mux only.
const requestIDHeader = callpath.RequestIDHeader

const metaSubscriptionID = "io.modelcontextprotocol/subscriptionId"

// Is reports whether r belongs to the 2026-07-28 era.
func Is(r *http.Request) bool {
	if r.Method != http.MethodPost {
		return false
	}
	if vs := r.Header["Mcp-Protocol-Version"]; len(vs) > 0 {
		// A repeated header naming 2026-07-28 anywhere is modern, where it
		// is refused (headers.go).
		return slices.ContainsFunc(vs, func(v string) bool { return v >= modernVersion })
	}
	if r.Header.Get("Mcp-Session-Id") != "" || r.Body == nil {
		return false
	}
	return modernBody(r)
}

// modernBody tells a POST without a version header and without a session
// by its body, which it leaves readable: a request carrying a per-request
// protocol version is modern (the modern handler answers the missing
// header); anything else, initialize first, is legacy.
func modernBody(r *http.Request) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, callpath.MaxBody+1))
	r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), orErr(r.Body, err)))
	if err != nil || len(body) > callpath.MaxBody {
		return false
	}
	var m wire.Message
	if wire.Decode(body, &m) != nil || m.Method == "initialize" || !m.IsCall() {
		return false
	}
	return bytes.Contains(m.Params, []byte(`"io.modelcontextprotocol/protocolVersion"`))
}
func orErr(r io.Reader, err error) io.Reader {
	if err != nil {
		return errReader{err}
	}
	return r
}

// serveModern serves one 2026-07-28 request.
func (s *Handler) serveModern(w http.ResponseWriter, r *http.Request) {
	r.Header.Del(requestIDHeader)
	r.Header.Del(inputResponsesHeader)
	body, err := io.ReadAll(io.LimitReader(r.Body, callpath.MaxBody+1))
	if err != nil || len(body) > callpath.MaxBody {
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), orErr(r.Body, err)))
		s.stateless.ServeHTTP(w, r)
		return
	}
	if s.answerEarly(w, r, body) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.stateless.ServeHTTP(w, r)
}

// answerEarly answers what the SDK would not (a repeated header, Mcp-Param-*
// mismatches, the tasks extension's requests) and reports whether it did;
// otherwise it passes the call's id and raw inputResponses on to the
// middleware in headers.
func (s *Handler) answerEarly(w http.ResponseWriter, r *http.Request, body []byte) bool {
	if refuseRepeatedHeader(w, r, body) { // headers.go
		return true
	}
	var m wire.Message
	if wire.Decode(body, &m) != nil || !m.IsCall() {
		return false
	}
	if s.refuseCallHeaders(w, r, &m) {
		return true
	}
	if s.bridge.forwardRetry(w, r, body, &m) { // mrtr.go
		return true
	}
	r.Header.Set(requestIDHeader, string(m.ID))
	if raw := rawInputResponses(m.Params); raw != nil {
		r.Header.Set(inputResponsesHeader, string(raw)) // mrtr.go
	}
	return s.serveTaskRequest(w, r, &m) // tasks.go
}

// refuseCallHeaders answers a tools/call whose Mcp-Param-* headers do not
// match its arguments (headers.go), and reports whether it did.
func (s *Handler) refuseCallHeaders(w http.ResponseWriter, r *http.Request, m *wire.Message) bool {
	if m.Method != "tools/call" || !hasParamHeaders(r.Header) {
		return false
	}
	var p wire.CallParams
	if wire.DecodeCallParams(m.Params, &p) != nil {
		return false // the SDK answers the malformed params
	}
	if !hasParamHeaders(r.Header) {
		return false
	}
	return s.refuseParamMismatch(w, r, m.ID, s.rt.Load().View(callpath.CallerFrom(r.Context()).Profile).Lookup(p.Name), p.Arguments)
}

// IsSession reports whether ss is the SDK's throwaway session for a
// 2026-07-28 request.
func IsSession(ss *mcp.ServerSession) bool {
	if ss == nil {
		return false
	}
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= modernVersion
}

// modernRequestState is an SDK-path 2026-07-28 request's throwaway
// session, era and stream (the sink of its round, when bridged), allocated
// together.
type modernRequestState struct {
	st    callpath.Session
	era   Era
	round callpath.SDKSink
}

// Receive serves one 2026-07-28 request that reached the SDK's receiving
// middleware, with a session built from it.
func (s *Handler) Receive(ctx context.Context, ss *mcp.ServerSession, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	rs := newRequestState(ctx, ss, req)
	st, e := &rs.st, &rs.era
	switch method {
	case "tools/call", "prompts/get", "resources/read":
		res, err := s.bridge.modernCall(ctx, st, e, &rs.round, method, req, next)
		return s.completed(method, res, err)
	case "server/discover":
		return s.discover(ctx, method, req, next)
	case "subscriptions/listen":
		return s.listens.listen(ctx, st, req)
	case "tasks/get", "tasks/update", "tasks/cancel":
		return s.taskMethod(ctx, st, e, method, req) // tasks.go
	}
	res, err := s.calls.Dispatch(ctx, st, e, method, req, next)
	return s.completed(method, res, err)
}

// newRequestState builds the throwaway session of an SDK-path request:
// its user, declared capabilities (the tasks extension included) and log
// level.
func newRequestState(ctx context.Context, ss *mcp.ServerSession, req mcp.Request) *modernRequestState {
	c := callpath.CallerFrom(ctx)
	rs := &modernRequestState{st: callpath.Session{User: c.User, Profile: c.Profile}}
	st := &rs.st
	st.SetServer(ss)
	rs.round.Bind(ctx, st)
	if ip := ss.InitializeParams(); ip != nil {
		st.Caps, st.ClientCaps = upstream.Capabilities(ip.Capabilities), ip.Capabilities
		declareTasks(st, &rs.era, ip) // tasks.go
	}
	st.Touch()
	if m := req.GetParams(); m != nil {
		if lvl, ok := m.GetMeta()["io.modelcontextprotocol/logLevel"].(string); ok {
			st.Level = lvl
		}
	}
	return rs
}

// completed adds what a 2026-07-28 result must carry to a raw result
// (modernResult).
func (s *Handler) completed(method string, res mcp.Result, err error) (mcp.Result, error) {
	if rr, ok := res.(*mcpwire.RawResult); ok && err == nil {
		return &mcpwire.RawResult{Raw: s.modernResult(method, rr.Raw)}, nil
	}
	return res, err
}

// discover lets the SDK answer server/discover, with the catalog's
// instructions and capabilities, the caching hint and the extensions.
func (s *Handler) discover(ctx context.Context, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	res, err := next(ctx, method, req)
	dr, ok := res.(*mcp.DiscoverResult)
	if !ok || err != nil {
		return res, err
	}
	cat := s.rt.Load().View(callpath.CallerFrom(ctx).Profile)
	if text := cat.Instructions(); text != "" {
		dr.Instructions = text
	}
	dr.Cacheable = s.cacheable()
	callpath.SetCapabilities(cat, dr)
	s.advertiseTasks(dr) // tasks.go
	return res, err
}

// cacheTTLMs is how long a modern client may keep a list or read result
// when no upstream said: upstream lists change without notice to mcp-mux's
// callers' caches, so it is short; subscriptions/listen tells listeners of
// changes at once.
const cacheTTLMs = 1000

// cacheable is the caching hint of server/discover: private whenever a
// result can differ by caller (callers are told apart, or upstreams see
// each caller's own credentials), public otherwise.
func (s *Handler) cacheable() mcp.Cacheable {
	return mcp.Cacheable{TTLMs: cacheTTLMs, CacheScope: s.cacheScope()}
}

func (s *Handler) cacheScope() string {
	rt := s.rt.Load()
	if (rt.Config.Inbound.Auth.Mode != "" && rt.Config.Inbound.Auth.Mode != "none") || len(rt.Config.Profiles) > 0 {
		return "private"
	}
	for _, b := range rt.Backends {
		if b.Resolver != nil && b.Resolver.PerCaller() {
			return "private"
		}
	}
	return "public"
}

// listCaching is the ttlMs and cacheScope of a list mcp-mux serves from
// its catalog: the shortest TTL its upstreams gave that list (bounded by
// upstream.MaxCacheTTL; cacheTTLMs when none gave one) and the narrowest
// scope, its own or theirs.
func (s *Handler) listCaching(method string) (ttlMs int64, scope string) {
	h := s.rt.Load().ListHint(method)
	ttlMs, scope = cacheTTLMs, s.cacheScope()
	if h.Set {
		ttlMs = h.TTL.Milliseconds()
		if h.Private {
			scope = "private"
		}
	}
	return ttlMs, scope
}

// cachedMethods are the results that carry ttlMs and cacheScope.
var cachedMethods = []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read",
	"skills/list", "skills/get", "resources/directory/read"} // the skills extension's (callpath/skills.go)

// modernResult adds what a 2026-07-28 result must carry and a raw upstream
// result may lack: resultType, and for lists and reads ttlMs and cacheScope.
// Fields the result already has are kept, except an upstream read's
// caching hint, which is bounded (upstream.MaxCacheTTL) and never wider
// than mcp-mux's own scope (rebound).
func (s *Handler) modernResult(method string, raw json.RawMessage) json.RawMessage {
	cached := slices.Contains(cachedMethods, method)
	if len(raw) >= 2 && raw[0] == '{' && !cached && !bytes.Contains(raw, []byte(`"resultType"`)) {
		// The common case, without decoding: an upstream's result (valid
		// JSON, read by the upstream's reader) that has no resultType.
		return prependMember(raw, `"resultType":"complete",`)
	}
	var have resultMembers
	if len(raw) < 2 || raw[0] != '{' || json.Unmarshal(raw, &have) != nil ||
		(have.ResultType != nil && string(have.ResultType) != `"complete"`) {
		return raw
	}
	if cached && s.rebound(method, &have) {
		return s.reboundResult(raw, &have)
	}
	add := make([]byte, 0, 96)
	if have.ResultType == nil {
		add = append(add, `"resultType":"complete",`...)
	}
	if cached {
		add = s.appendCaching(method, add, &have)
	}
	if len(add) == 0 {
		return raw
	}
	return prependMember(raw, string(add))
}

// resultMembers are the members of a result modernResult may add.
type resultMembers struct {
	ResultType json.RawMessage `json:"resultType"`
	TTL        json.RawMessage `json:"ttlMs"`
	Scope      json.RawMessage `json:"cacheScope"`
}

// rebound reports whether a result's own caching hint must be replaced:
// a ttlMs that is not an integer within 0..upstream.MaxCacheTTL, or a
// public scope where mcp-mux's is private.
func (s *Handler) rebound(method string, have *resultMembers) bool {
	if have.TTL == nil && have.Scope == nil {
		return false
	}
	var ms int64
	if have.TTL != nil && (json.Unmarshal(have.TTL, &ms) != nil || ms < 0 || ms > upstream.MaxCacheTTL.Milliseconds()) {
		return true
	}
	_, scope := s.listCaching(method)
	return have.Scope != nil && scope == "private" && string(have.Scope) != `"private"`
}

// reboundResult is raw with its caching hint bounded and narrowed.
func (s *Handler) reboundResult(raw json.RawMessage, have *resultMembers) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return raw
	}
	h := upstream.HintOf(have.TTL, have.Scope)
	ms := int64(cacheTTLMs)
	if h.Set {
		ms = h.TTL.Milliseconds()
	}
	scope := s.cacheScope()
	if h.Private {
		scope = "private"
	}
	obj["ttlMs"], _ = json.Marshal(ms)
	obj["cacheScope"], _ = json.Marshal(scope)
	if obj["resultType"] == nil {
		obj["resultType"] = json.RawMessage(`"complete"`)
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return raw
	}
	return out
}

// appendCaching appends the ttlMs and cacheScope members a list or read
// result lacks (have) to add: a list's from its upstreams (listCaching).
func (s *Handler) appendCaching(method string, add []byte, have *resultMembers) []byte {
	ttl, scope := s.listCaching(method)
	if have.TTL == nil {
		add = append(add, `"ttlMs":`...)
		add = strconv.AppendInt(add, ttl, 10)
		add = append(add, ',')
	}
	if have.Scope == nil {
		add = append(add, `"cacheScope":"`...)
		add = append(add, scope...)
		add = append(add, `",`...)
	}
	return add
}

// prependMember inserts members (each followed by a comma) at the start
// of the object raw.
func prependMember(raw json.RawMessage, members string) json.RawMessage {
	out := make([]byte, 0, len(raw)+len(members))
	out = append(out, '{')
	if string(bytes.TrimSpace(raw[1:])) == "}" {
		members = members[:len(members)-1] // no trailing comma before an empty body
	}
	out = append(out, members...)
	return append(out, raw[1:]...)
}

// errMissingParams is the error for a request without its params.
var errMissingParams = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing params"}

// errReader is a reader that fails with err.
type errReader struct{ err error }

// Read returns the reader's error.
func (e errReader) Read([]byte) (int, error) { return 0, e.err }
