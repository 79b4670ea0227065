package modern

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sjson "github.com/segmentio/encoding/json"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The 2026-07-28 fast path.
//
// A 2026-07-28 tools/call or list (tools, prompts, resources, resource
// templates) is served here, from the raw body,
// before go-sdk's stateless handler (which would build a throwaway session
// per request and decode every message with its 32 KiB decoders). The call
// takes the same route as on the SDK path — Router.CallTool with a session built
// from the request (user, declared capabilities, log level), so header
// resolution, guardrails, interceptors, Mcp-Param-* checks and the raw
// name upstream are those of every call — and the upstream's raw result is
// written back with resultType (and, for lists, ttlMs and cacheScope) added
// as modernResult adds them. Progress and log messages ride the request's
// own stream (the response becomes an event stream on the first one); a
// closed stream cancels the upstream call.
//
// The decision rule. The fast path takes a request only when it can tell,
// from the headers, the decoded envelope and the catalog entry, that the SDK
// would accept it and that the answer needs nothing but a forwarded call:
//
//   - one message (no batch), a call with a plain id (an integer, or a string
//     without escapes: the SDK re-encodes ids), tools/call or one of the lists;
//   - Content-Type application/json, an Accept naming both JSON and event
//     streams, no Last-Event-ID;
//   - MCP-Protocol-Version "2026-07-28", equal to _meta's protocolVersion;
//     Mcp-Method equal to the method; for tools/call Mcp-Name equal to the
//     name (the SDK knows no tools, so it checks no Mcp-Param-* headers:
//     refuseParamMismatch does, on both paths);
//   - _meta an object with clientCapabilities an object and clientInfo, when
//     present, an implementation, as the SDK requires;
//   - nothing of a multi-round-trip retry (no requestState, no
//     inputResponses) and nothing of tasks (no "task" member, no mention of
//     the io.modelcontextprotocol/tasks extension);
//   - for tools/call, a catalog route to an upstream tool: not tool_search,
//     not an unknown name, not a built-in task tool, not a task submit.
//
// Everything else — every request the SDK refuses included — goes to the
// SDK path unchanged, so its errors (-32020 header mismatches, -32022, -32602
// for missing params or _meta) are the SDK's own, byte for byte.
//
// What a taken call may still need of the slow machinery is handled here:
// an upstream's input_required has its requestState sealed in mcp-mux's
// envelope (sealInputRequired); and a call that a legacy upstream could
// interrupt with a request to the client — the client declared roots,
// sampling or elicitation and the upstream is not a 2026-07-28 server — runs
// as a bridged call (startParked, await: mrtr.go), whose requests become
// input_required; its retries come back through the SDK path, which finds
// the parked call. Every other call runs on the request's goroutine, and a
// request its upstream sends is answered as the bridge would answer it: ping,
// or a missing-capability error.

// Serve serves one 2026-07-28 POST whose body (read by the caller, and
// returned to its pool when Serve returns) is body: on the fast path when
// it can (fastpath.go), else through go-sdk's stateless handler.
func (s *Handler) Serve(w http.ResponseWriter, r *http.Request, body []byte, sh wire.Shape) {
	if s.serveFast(w, r, body, sh) {
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(slices.Clone(body)))
	s.serveModern(w, r)
}

// serveFast reports whether the fast path answered r.
func (s *Handler) serveFast(w http.ResponseWriter, r *http.Request, body []byte, sh wire.Shape) bool {
	if refuseRepeatedHeader(w, r, body) { // headers.go, for both paths
		return true
	}
	if sh.Batch || s.noFast || !modernFastHeaders(r.Header) {
		return false
	}
	var m wire.Message
	if wire.Decode(body, &m) != nil || !fastEnvelope(r, &m) {
		return false
	}
	params := bytes.TrimSpace(m.Params)
	if len(params) < 2 || params[0] != '{' || mentionsSlowPath(params) {
		return false
	}
	switch {
	case m.Method == "tools/call":
		return s.fastCall(w, r, &m, params)
	case fastLists[m.Method]:
		return s.fastList(w, r, &m, params)
	}
	return false
}

// fastLists are the lists the fast path answers.
var fastLists = map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true, "resources/templates/list": true}

// fastEnvelope reports whether the decoded m is a call the fast path may
// take: an id the SDK echoes byte for byte, a method the Mcp-Method header
// names.
func fastEnvelope(r *http.Request, m *wire.Message) bool {
	return m.IsCall() && plainID(m.ID) && r.Header.Get("Mcp-Method") == m.Method
}

// fastCall serves a tools/call of an upstream tool and reports whether it
// answered (false leaves it to the SDK path).
func (s *Handler) fastCall(w http.ResponseWriter, r *http.Request, m *wire.Message, params []byte) bool {
	var p wire.CallParams
	if wire.DecodeCallParams(params, &p) != nil || p.Name == "" || r.Header.Get("Mcp-Name") != p.Name {
		return false
	}
	rq, ok := s.capsCache.request(callpath.CallerFrom(r.Context()), p.Meta)
	if !ok {
		return false
	}
	runtime := s.rt.Load()
	rt := runtime.View(rq.profile).Lookup(p.Name) // the call's one lookup: the pipeline takes it
	if rt == nil || rt.Builtin || rt.Task != nil || rt.Server == nil {
		return false // tool_search, unknown, a built-in task tool or a task submit
	}
	if s.refuseParamMismatch(w, r, m.ID, rt, p.Arguments) {
		return true
	}
	s.modernFastCall(w, r, rq, runtime, rt, m, &p)
	return true
}

// fastList serves one of the fastLists and reports whether it answered.
func (s *Handler) fastList(w http.ResponseWriter, r *http.Request, m *wire.Message, params []byte) bool {
	var p struct {
		Cursor json.RawMessage `json:"cursor"`
		Meta   json.RawMessage `json:"_meta"`
	}
	var cursor string
	if sjson.Unmarshal(params, &p) != nil || (p.Cursor != nil && json.Unmarshal(p.Cursor, &cursor) != nil) || string(p.Cursor) == "null" {
		return false
	}
	rq, ok := s.capsCache.request(callpath.CallerFrom(r.Context()), p.Meta)
	if !ok {
		return false
	}
	if s.tel.Enabled() {
		_, span := s.tel.Server(r.Context(), telemetry.Op{Method: m.Method, RequestID: string(m.ID), Protocol: modernVersion, Transport: "tcp",
			User: rq.user}, p.Meta, r.Header)
		defer span.End(nil, false)
	}
	s.modernFastList(w, rq, m, cursor)
	return true
}

// modernFastHeaders checks what the SDK's stateless handler checks of the
// headers before it reads a body, and that the request is 2026-07-28.
func modernFastHeaders(h http.Header) bool {
	if h.Get("Mcp-Protocol-Version") != modernVersion || len(h.Values("Last-Event-ID")) > 0 {
		return false
	}
	return modernContentHeaders(h)
}

// modernContentHeaders reports whether a POST's Content-Type and Accept are
// what the SDK's stateless handler requires (it answers 415 or 400
// otherwise).
func modernContentHeaders(h http.Header) bool {
	if ct := h.Get("Content-Type"); ct != "application/json" && !(len(ct) > 17 && ct[:17] == "application/json;") {
		return false
	}
	return mcpwire.AcceptsBoth(h.Values("Accept"))
}

// plainID reports whether id is one the SDK echoes byte for byte: an
// integer of at most 15 digits (not -0), or a string of printable ASCII
// without escapes.
func plainID(id json.RawMessage) bool {
	switch {
	case len(id) == 0:
		return false
	case id[0] == '"':
		return plainString(id)
	}
	return plainInteger(id)
}

// plainString reports whether id is a JSON string of printable ASCII
// without escapes.
func plainString(id json.RawMessage) bool {
	if len(id) < 2 || id[len(id)-1] != '"' {
		return false
	}
	for _, c := range id[1 : len(id)-1] {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

// plainInteger reports whether id is an integer of at most 15 digits,
// without leading zeros, and not -0.
func plainInteger(id json.RawMessage) bool {
	digits := id
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 15 || (digits[0] == '0' && len(id) > 1) { // not 01, not -0
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// slowPathMarks are the params members and names the fast path leaves to
// the SDK path: a multi-round-trip retry, and anything of tasks. A match
// inside arguments only costs that call the fast path.
var slowPathMarks = [][]byte{[]byte(`"requestState"`), []byte(`"inputResponses"`), []byte(`"task"`), []byte(`io.modelcontextprotocol/tasks`)}

func mentionsSlowPath(params []byte) bool {
	for _, mark := range slowPathMarks {
		if bytes.Contains(params, mark) {
			return true
		}
	}
	return false
}

// modernMeta is the part of a 2026-07-28 request's _meta the fast path reads.
type modernMeta struct {
	Version string          `json:"io.modelcontextprotocol/protocolVersion"`
	Caps    json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	Info    json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	Level   json.RawMessage `json:"io.modelcontextprotocol/logLevel"`
}

// modernReq is what the fast path knows of a request's caller.
type modernReq struct {
	user    string
	profile string // the caller's profile (callpath.Profile)
	level   string
	caps    *clientCaps
}

// request validates a request's _meta as the SDK does (a false
// result leaves the request to the SDK, which answers the error).
func (c *capsCache) request(caller callpath.Caller, meta json.RawMessage) (modernReq, bool) {
	var mm modernMeta
	meta = bytes.TrimSpace(meta)
	if len(meta) < 2 || meta[0] != '{' {
		return modernReq{}, false
	}
	// The SDK reads _meta into a map: member names match exactly.
	if _, err := sjson.Parse(meta, &mm, sjson.DontMatchCaseInsensitiveStructFields|sjson.ZeroCopy); err != nil ||
		mm.Version != modernVersion {
		return modernReq{}, false
	}
	e := c.get(mm.Caps, mm.Info)
	if e == nil {
		return modernReq{}, false
	}
	rq := modernReq{user: caller.User, profile: caller.Profile, caps: e}
	if len(mm.Level) > 0 && mm.Level[0] == '"' {
		_ = json.Unmarshal(mm.Level, &rq.level)
	}
	return rq, true
}

// init makes st the throwaway session of one fast-path request, as
// Receive builds it for the SDK path.
func (rq modernReq) init(st *callpath.Session) {
	st.User, st.Profile, st.Caps, st.ClientCaps, st.Level = rq.user, rq.profile, rq.caps.key, rq.caps.v1, rq.level
}

// clientCaps is a validated pair of clientCapabilities and clientInfo.
type clientCaps struct {
	v1     *mcp.ClientCapabilities
	key    string // upstream.Capabilities of v1
	inputs bool   // roots, sampling or elicitation declared: a legacy upstream may ask for input
}

// capsCache remembers the capability sets clients send (few distinct ones,
// on every request), so that a call decodes none. It is bounded: sets
// longer than maxCapsKey are validated every time, and when full it starts
// over.
type capsCache struct {
	mu sync.RWMutex
	m  map[string]*clientCaps
}

const (
	maxCapsCache = 256
	maxCapsKey   = 2 << 10 // bytes of clientCapabilities and clientInfo
)

// get validates caps and info as the SDK's validateRequestMeta does, and
// returns their entry, or nil when the SDK would refuse them.
func (c *capsCache) get(caps, info json.RawMessage) *clientCaps {
	caps, info = bytes.TrimSpace(caps), bytes.TrimSpace(info)
	if len(caps) < 2 || caps[0] != '{' {
		return nil // missing, null or not an object: the SDK refuses it
	}
	var kb [512]byte
	key := append(append(append(kb[:0], caps...), 0), info...)
	if e := c.lookup(key); e != nil {
		return e
	}
	e := validateCaps(caps, info)
	if e != nil && len(key) <= maxCapsKey {
		c.store(key, e)
	}
	return e
}

// lookup returns the cached entry of key, or nil.
func (c *capsCache) lookup(key []byte) *clientCaps {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.m[string(key)]
}

// store caches e under key, starting over when the cache is full.
func (c *capsCache) store(key []byte, e *clientCaps) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= maxCapsCache || c.m == nil {
		c.m = make(map[string]*clientCaps)
	}
	c.m[string(key)] = e
}

// validateCaps validates clientCapabilities and clientInfo as the SDK
// does, and returns their entry, or nil when the SDK would refuse them.
func validateCaps(caps, info json.RawMessage) *clientCaps {
	if len(info) > 0 {
		var impl *mcp.Implementation
		if json.Unmarshal(info, &impl) != nil || impl == nil {
			return nil
		}
	}
	var v2 struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if json.Unmarshal(caps, &v2) != nil {
		return nil
	}
	v1 := v2.ClientCapabilities
	v1.RootsV2 = v2.Roots
	if v1.RootsV2 != nil {
		v1.Roots = *v1.RootsV2
	}
	return &clientCaps{v1: &v1, key: upstream.Capabilities(&v1), inputs: v1.RootsV2 != nil || v1.Sampling != nil || v1.Elicitation != nil}
}

// modernSink is a fast-path call's sink: notifications on the request's
// stream (callpath.FastSink), and requests answered as a bridged call answers
// those the client cannot serve.
type modernSink struct{ *callpath.FastSink }

// Request answers ping, and refuses what the client cannot serve or a
// 2026-07-28 server would never send mid-call.
func (k modernSink) Request(_ context.Context, method string, _ json.RawMessage) (json.RawMessage, error) {
	if method == "ping" {
		return json.RawMessage(`{}`), nil
	}
	if !k.Session().Supports(method) {
		return nil, &wire.Error{Code: codeMissingCapability, Message: fmt.Sprintf("the client did not declare the capability %s needs", method)}
	}
	// Only a 2026-07-28 upstream runs unbridged with such a client, and it
	// asks with input_required, never mid-call.
	return nil, &wire.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%s sent mid-call by a 2026-07-28 server is not forwarded", method)}
}

// modernCallState is a fast-path call's session, sink, era and what its
// steps share, allocated together.
type modernCallState struct {
	st     callpath.Session
	f      callpath.FastSink
	era    Era
	p      *wire.CallParams
	server string
	c      *callpath.Call // the call, with the route the fast path looked up and its runtime
}

func (s *Handler) modernFastCall(w http.ResponseWriter, r *http.Request, rq modernReq, runtime *callpath.Runtime, rt *callpath.Route, m *wire.Message, p *wire.CallParams) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	cs := &modernCallState{p: p, server: rt.Server.Name}
	rq.init(&cs.st)
	cs.f.Bind(&cs.st, w)
	cs.c = s.calls.ToolCall(ctx, &cs.st, &cs.era, nil, r.Header, p)
	cs.c.Runtime, cs.c.Route = runtime, rt // the call's one lookup
	var (
		raw json.RawMessage
		err error
	)
	ctx, span := s.tel.Server(ctx, telemetry.Op{Method: "tools/call", Tool: p.Name, RequestID: string(m.ID), Protocol: modernVersion,
		Transport: "tcp", User: cs.st.User}, p.Meta, r.Header)
	defer func() { span.End(err, err == nil && wire.IsToolError(raw)) }()
	if rq.caps.inputs && rt.Deny == nil && rt.Server.Up.EraFor(upstream.VersionModern) < modernVersion {
		raw, err = s.bridgedFastCall(ctx, cs) // the upstream may ask the client for input mid-call
	} else {
		raw, err = s.directFastCall(ctx, cs)
	}
	if err == nil {
		raw = s.modernResult("tools/call", raw)
	}
	s.modernFinish(&cs.f, m.ID, raw, err)
}

// stream is the call's sink on its own response stream.
func (cs *modernCallState) stream() modernSink { return modernSink{&cs.f} }

// target names the call as ownerOf does.
func (cs *modernCallState) target() string { return "tools/call " + cs.p.Name }

// directFastCall runs the call on the request's goroutine; an upstream's
// input_required has its requestState sealed.
func (s *Handler) directFastCall(ctx context.Context, cs *modernCallState) (json.RawMessage, error) {
	cs.c.Sink = cs.stream()
	raw, err := s.calls.GuardedRun(ctx, cs.c)
	if ir, ok := callpath.AsInputRequired(raw); ok && err == nil {
		return s.bridge.sealInputRequired(&cs.st, cs.server, cs.target(), ir)
	}
	return raw, err
}

// bridgedFastCall runs the call bridged (mrtr.go): requests the upstream
// sends the client become input_required.
func (s *Handler) bridgedFastCall(ctx context.Context, cs *modernCallState) (json.RawMessage, error) {
	e := &cs.era
	pc := s.bridge.startParked(ctx, cs.stream(), e, cs.server, cs.target(), func(ctx context.Context) (mcp.Result, error) {
		cs.c.Sink = e.bridge
		raw, err := s.calls.Run(ctx, cs.c)
		if err != nil {
			return nil, err
		}
		return &mcpwire.RawResult{Raw: raw}, nil
	})
	res, err := s.bridge.await(ctx, cs.stream(), pc)
	if err != nil {
		return nil, err
	}
	if rr, ok := res.(*mcpwire.RawResult); ok {
		return rr.Raw, nil
	}
	return json.Marshal(res)
}

// modernFastList answers a list as Receive does: the catalog's, with
// resultType, ttlMs and cacheScope.
func (s *Handler) modernFastList(w http.ResponseWriter, rq modernReq, m *wire.Message, cursor string) {
	raw, err := s.fastListResult(s.rt.Load().View(rq.profile), rq, m.Method, cursor)
	s.modernFinish(callpath.NewFastSink(nil, w), m.ID, raw, err)
}

// pagedList is a list the catalog serves in pages: its items and the
// result's member.
type pagedList struct {
	items func(*callpath.Catalog) []json.RawMessage
	field string
}

// pagedLists are the fastLists other than tools/list.
var pagedLists = map[string]pagedList{
	"prompts/list":             {(*callpath.Catalog).Prompts, "prompts"},
	"resources/list":           {(*callpath.Catalog).Resources, "resources"},
	"resources/templates/list": {(*callpath.Catalog).Templates, "resourceTemplates"},
}

// fastListResult is the result of one of the fastLists.
func (s *Handler) fastListResult(cat *callpath.Catalog, rq modernReq, method, cursor string) (json.RawMessage, error) {
	s.rt.Load().RefreshStale(time.Now())
	if method == "tools/list" {
		return s.fastToolsList(cat, rq), nil
	}
	l := pagedLists[method]
	raw, err := callpath.Page(l.items(cat), l.field, cursor, s.pageSize)
	if err != nil {
		return nil, err
	}
	return s.modernResult(method, raw), nil
}

// fastToolsList is tools/list: with tool_search, the catalog's list without
// promotions (a 2026-07-28 caller has none).
func (s *Handler) fastToolsList(cat *callpath.Catalog, rq modernReq) json.RawMessage {
	if !cat.Searching() {
		return s.modernToolsList(cat)
	}
	var st callpath.Session
	rq.init(&st)
	return s.modernResult("tools/list", st.Promo.ToolsList(cat))
}

// modernToolsList returns cat's list with resultType, ttlMs and
// cacheScope, built once per catalog and cache scope (the catalog's Memo).
func (s *Handler) modernToolsList(cat *callpath.Catalog) json.RawMessage {
	ttl, scope := s.listCaching("tools/list")
	key := scope + " " + strconv.FormatInt(ttl, 10)
	if c := cat.Memo(); c != nil && c.Key == key {
		return c.Raw
	}
	raw := s.modernResult("tools/list", cat.ListJSON())
	cat.SetMemo(&catalog.Memo{Key: key, Raw: raw})
	return raw
}

// modernFinish writes a fast-path response. Errors carry the HTTP status
// the SDK gives them on the 2026-07-28 protocol.
func (s *Handler) modernFinish(f *callpath.FastSink, id json.RawMessage, raw json.RawMessage, err error) {
	out := s.buffers.Get()
	defer s.buffers.Put(out)
	status := http.StatusOK
	var b []byte
	if err != nil {
		code, msg, data := int64(jsonrpc.CodeInternalError), "internal error", json.RawMessage(nil)
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			code, msg, data = je.Code, je.Message, je.Data
		case errors.Is(err, context.Canceled):
			msg = "request cancelled"
		}
		b = wire.AppendError((*out)[:0], id, code, msg, data)
		status = modernErrorStatus(code)
	} else {
		b = wire.AppendResult((*out)[:0], id, raw)
	}
	*out = b[:0]
	f.FinishStatus(b, status)
}

// modernErrorStatus is the HTTP status of a JSON-RPC error on the
// 2026-07-28 protocol (SEP-2575), as the SDK sends it.
func modernErrorStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, codeMissingCapability:
		return http.StatusBadRequest
	}
	return http.StatusOK
}
