package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/interceptor"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Each stage's tests run it alone, in front of a next step the test
// controls, under the four ways a call ends: answered, failed, cancelled
// (notifications/cancelled, the session ending) and its client gone (the
// request's context ended while next still runs). Each stage's invariant
// must hold in all four.

// ending is one way the step after a stage ends a call.
type ending struct {
	name string
	run  func(ctx context.Context, c *Call) (json.RawMessage, error)
	// cancel ends the call's context while next runs (cancelled, client gone).
	cancel bool
}

var endings = []ending{
	{name: "success", run: func(context.Context, *Call) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[]}`), nil
	}},
	{name: "error", run: func(context.Context, *Call) (json.RawMessage, error) {
		return nil, errors.New("upstream broke")
	}},
	{name: "cancelled", cancel: true, run: waitDone},
	{name: "client leaves", cancel: true, run: waitDone},
}

// waitDone blocks until the call's context ends.
func waitDone(ctx context.Context, _ *Call) (json.RawMessage, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// runEnding runs stage in front of e's next with c, ending it as e says.
func runEnding(t *testing.T, stage Stage, e ending, c *Call) (json.RawMessage, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	entered := make(chan struct{}, 1)
	next := func(ctx context.Context, c *Call) (json.RawMessage, error) {
		entered <- struct{}{}
		return e.run(ctx, c)
	}
	if e.cancel {
		go func() { <-entered; cancel() }()
	}
	return stage.Wrap(next)(ctx, c)
}

// testCall is a tools/call of tool "t" at server "s" by alice.
func testCall() *Call {
	b := &Backend{Name: "s", Config: &config.Server{}}
	return &Call{Method: "tools/call", Session: &Session{ID: "sess", User: "alice"}, Era: LegacyEra{}, Name: "s_t",
		Key: upstream.Key{User: "alice", Thread: "th"}, Caller: NewCaller("alice", ""),
		Route: &Route{Name: "s_t", Raw: "t", Server: b}, Backend: b, Raw: "t", Args: json.RawMessage(`{"q":1}`)}
}

func testRouter(t *testing.T, opts Options) *Router {
	t.Helper()
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.Runtime == nil {
		opts.Runtime = &atomic.Pointer[Runtime]{}
		opts.Runtime.Store(NewRuntime(&config.Config{}))
	}
	if opts.Life == nil {
		opts.Life = &Life{}
	}
	return New(opts)
}

// TestStagesListed: the pipeline is the list, in its order, and every
// stage names the methods it applies to.
func TestStagesListed(t *testing.T) {
	s := testRouter(t, Options{})
	var names []string
	for _, st := range s.Stages() {
		if st.Methods == 0 || st.Wrap == nil {
			t.Errorf("stage %q applies to nothing", st.Name)
		}
		names = append(names, st.Name)
	}
	want := "audit session route apps policy skills pins limits outcome content guards processors arguments authorize approvals tasks interceptors credentials accounts readcache"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("stages %q, want %q", got, want)
	}
}

// TestPipelineLeavesOutUnconfigured: a stage the runtime does not need is
// not in its pipeline (it costs nothing), and one it needs is.
func TestPipelineLeavesOutUnconfigured(t *testing.T) {
	// assembled lists the stages assemble puts into rt's pipeline.
	assembled := func(s *Router, rt *Runtime) map[string]bool {
		in := map[string]bool{}
		stages := s.Stages()
		for i := range stages {
			st := &stages[i]
			wrap, name := st.Wrap, st.Name
			st.Wrap = func(next CallFunc) CallFunc { in[name] = true; return wrap(next) }
		}
		s.assemble(rt, stages)
		return in
	}
	s := testRouter(t, Options{})
	rt := s.rt.Load()
	optional := []string{"audit", "apps", "pins", "limits", "content", "guards", "processors", "authorize", "approvals", "interceptors", "credentials", "accounts"}
	in := assembled(s, rt)
	for _, name := range optional {
		if in[name] {
			t.Errorf("stage %s is in the pipeline of a runtime that configures none of it", name)
		}
	}
	for _, name := range []string{"session", "route", "policy", "skills", "outcome", "arguments", "tasks", "readcache"} {
		if !in[name] {
			t.Errorf("stage %s is missing from the pipeline", name)
		}
	}
	rt.Interceptors = []interceptor.Interceptor{func(ctx context.Context, c *interceptor.Call, next interceptor.Next) (json.RawMessage, error) {
		return next(ctx)
	}}
	rt.Config.Limits.Rules = []config.LimitRule{{Name: "r", Scope: config.LimitScopeTool, InFlight: 1}}
	rt.Config.Approvals.Rules = []config.ApprovalRule{{Name: "a", Approver: config.ApproverCaller, Methods: []string{"tools/call"}}}
	rt.Config.Policy.Rules = []config.PolicyRule{{Name: "p", Condition: "true", Effect: config.PolicyAllow}}
	var err error
	if rt.Authz, err = NewAuthz(rt.Config, nil, nil); err != nil {
		t.Fatal(err)
	}
	if rt.Processors = NewProcessors(rt, nil, nil); rt.Processors != nil {
		t.Fatal("processors built from a config with none")
	}
	rt.Config.Processors = []config.Processor{{Name: "p", URL: "http://127.0.0.1:9", Phase: config.PhaseBoth}}
	rt.Processors = NewProcessors(rt, nil, nil)
	rt.Add(&Backend{Name: "s", Resolver: &headers.Resolver{}, Config: &config.Server{Telemetry: config.ServerTelemetry{Arguments: true},
		ResultGuards: &config.ResultGuards{Redact: true}, PinTools: config.PinBlock}, PerUser: true, Pins: toolpin.New(toolpin.Options{})})
	rt.Catalog.Store(appsCatalog())
	lim, err := ratelimit.New(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	in = assembled(testRouter(t, Options{Runtime: s.rt, Limits: lim, Audit: &audit.Auditor{}}), rt)
	for _, name := range optional {
		if !in[name] {
			t.Errorf("stage %s is left out of a runtime that configures it", name)
		}
	}
}

// TestSessionStage: the session's admission, the drain count and the
// pinned runtime come back however the call ends; a closing mux refuses;
// the caller's profile selects the view.
func TestSessionStage(t *testing.T) {
	s := testRouter(t, Options{MaxSessionCalls: 1})
	rt := s.rt.Load()
	rt.Catalog.Store(BuildCatalog(nil, NewCatalogPolicy(&config.Config{}, false), nil, hclog.NewNullLogger()))
	for _, e := range endings {
		c := testCall()
		c.Runtime = rt
		_, _ = runEnding(t, sessionStage(s), e, c)
		if n := c.Session.inflight.Active(); n != 0 {
			t.Errorf("%s: %d requests still admitted on the session", e.name, n)
		}
		rt.mu.Lock()
		calls := rt.calls
		rt.mu.Unlock()
		if calls != 0 {
			t.Errorf("%s: %d calls still on the runtime", e.name, calls)
		}
		if c.View == nil {
			t.Errorf("%s: no view", e.name)
		}
	}
	// A retired runtime is not pinned: the call runs on the current one,
	// and a route the edge found on the retired one is looked up again.
	old := rt
	cur := NewRuntime(&config.Config{})
	cur.Catalog.Store(old.Catalog.Load())
	s.rt.Store(cur)
	old.Retire()
	c := testCall()
	c.Runtime = old
	_, _ = sessionStage(s).Wrap(func(context.Context, *Call) (json.RawMessage, error) { return nil, nil })(t.Context(), c)
	if c.Runtime != cur || c.Route != nil {
		t.Fatalf("a call pinned to a retired runtime: runtime %p (want %p), route %v", c.Runtime, cur, c.Route)
	}
	s.life.Close()
	if _, err := sessionStage(s).Wrap(endings[0].run)(t.Context(), testCall()); err != ErrClosing {
		t.Fatalf("closing: %v, want ErrClosing", err)
	}
}

// TestLimitsStage: a call in flight holds its slot; the slot comes back
// however the call ends; a tools/call past the rule gets a tool error
// naming it, recorded as a denial; any other method the CodeLimited error.
func TestLimitsStage(t *testing.T) {
	lim, err := ratelimit.New(ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	lim.SetRules(config.Limits{Rules: []config.LimitRule{{Name: "one-at-a-time", Scope: config.LimitScopeTool, InFlight: 1}}})
	s := testRouter(t, Options{Limits: lim})
	stage := limitsStage(s)
	for _, e := range endings {
		held, proceed, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			defer close(done)
			_, _ = stage.Wrap(func(ctx context.Context, c *Call) (json.RawMessage, error) {
				close(held)
				<-proceed
				if e.cancel {
					cancel()
				}
				return e.run(ctx, c)
			})(ctx, testCall())
		}()
		<-held
		c := testCall()
		raw, err := stage.Wrap(endings[0].run)(t.Context(), c)
		if err != nil || !wire.IsToolError(raw) || !strings.Contains(string(raw), "one-at-a-time") || !strings.HasPrefix(c.Record.Denial, "limit: ") {
			t.Fatalf("%s: a second call while one is in flight: %s, %v, denial %q", e.name, raw, err, c.Record.Denial)
		}
		close(proceed)
		<-done
		cancel()
		if raw, err := stage.Wrap(endings[0].run)(t.Context(), testCall()); err != nil || wire.IsToolError(raw) {
			t.Fatalf("after %s: the slot did not come back: %s, %v", e.name, raw, err)
		}
	}
	// Any other method is refused with CodeLimited.
	lim.SetRules(config.Limits{Rules: []config.LimitRule{{Name: "one-per-caller", Scope: config.LimitScopeCaller, InFlight: 1}}})
	hold := make(chan struct{})
	go func() {
		_, _ = stage.Wrap(func(context.Context, *Call) (json.RawMessage, error) { <-hold; return nil, nil })(t.Context(), testCall())
	}()
	defer close(hold)
	deadline := time.Now().Add(5 * time.Second)
	for {
		c := testCall()
		c.Method = "prompts/get"
		_, err := stage.Wrap(endings[0].run)(t.Context(), c)
		if je, ok := errors.AsType[*jsonrpc.Error](err); ok && je.Code == CodeLimited {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("prompts/get past the rule: %v, want CodeLimited", err)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOutcomeStage: an upstream's JSON-RPC error passes through, a
// refusal on the way too, a cancelled call returns its context's error,
// and any other failure is a tool error naming server and tool (for a
// tools/call) or an internal error naming the server.
func TestOutcomeStage(t *testing.T) {
	s := testRouter(t, Options{})
	stage := outcomeStage(s)
	run := func(c *Call, err error) (json.RawMessage, error) {
		return stage.Wrap(func(context.Context, *Call) (json.RawMessage, error) { return nil, err })(t.Context(), c)
	}
	if _, err := run(testCall(), &wire.Error{Code: -32001, Message: "nope"}); err == nil || err.(*jsonrpc.Error).Code != -32001 {
		t.Fatalf("an upstream's JSON-RPC error: %v", err)
	}
	if _, err := run(testCall(), refusal{&jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad"}}); err == nil || err.(*jsonrpc.Error).Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("a refusal: %v", err)
	}
	raw, err := run(testCall(), errors.New("connection refused"))
	if err != nil || !wire.IsToolError(raw) || !strings.Contains(string(raw), `MCP server \"s\" failed to run tool \"t\"`) {
		t.Fatalf("a failed tools/call: %s, %v", raw, err)
	}
	c := testCall()
	c.Method = "resources/read"
	if _, err := run(c, errors.New("connection refused")); err == nil || err.(*jsonrpc.Error).Code != jsonrpc.CodeInternalError {
		t.Fatalf("a failed resources/read: %v", err)
	}
	for _, e := range endings[2:] {
		if raw, err := runEnding(t, stage, e, testCall()); !errors.Is(err, context.Canceled) || raw != nil {
			t.Fatalf("%s: %s, %v, want the context's error", e.name, raw, err)
		}
	}
	if raw, err := runEnding(t, stage, endings[0], testCall()); err != nil || string(raw) != `{"content":[]}` {
		t.Fatalf("success changed: %s, %v", raw, err)
	}
}

// TestArgumentsStage: fixed arguments are over the caller's in what goes
// upstream (the caller's own stay in c.Args for the stages before), the
// tool goes under its own name, _meta's protocol keys are dropped and
// its progress token replaced; a prompt goes under its own name.
func TestArgumentsStage(t *testing.T) {
	s := testRouter(t, Options{})
	var sent json.RawMessage
	next := func(_ context.Context, c *Call) (json.RawMessage, error) { sent = c.Upward; return nil, nil }
	c := testCall()
	c.Meta = json.RawMessage(`{"progressToken":7,"io.modelcontextprotocol/logLevel":"debug","k":"v"}`)
	if _, err := argumentsStage(s).Wrap(next)(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      map[string]any  `json:"_meta"`
	}
	if err := json.Unmarshal(sent, &got); err != nil {
		t.Fatalf("sent %s: %v", sent, err)
	}
	if got.Name != "t" || string(got.Arguments) != `{"q":1}` || got.Meta["k"] != "v" || got.Meta["progressToken"] == 7.0 ||
		got.Meta["io.modelcontextprotocol/logLevel"] != nil {
		t.Fatalf("sent %s", sent)
	}
	p := testCall()
	p.Method, p.Name, p.Raw = "prompts/get", "s_greet", "greet"
	p.Params = &mcp.GetPromptParams{Name: "s_greet", Arguments: map[string]string{"a": "b"}}
	if _, err := argumentsStage(s).Wrap(next)(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sent), `"name":"greet"`) || !strings.Contains(string(sent), `"a":"b"`) ||
		p.Params.(*mcp.GetPromptParams).Name != "s_greet" {
		t.Fatalf("sent %s (the prompt under its own name; the caller's params untouched)", sent)
	}
}

// TestPolicyStage: a guardrail's denial, an unknown tool and an
// unpromoted deferred tool are answered here, never forwarded.
func TestPolicyStage(t *testing.T) {
	s := testRouter(t, Options{})
	view := BuildCatalog(nil, NewCatalogPolicy(&config.Config{}, false), nil, hclog.NewNullLogger())
	forwarded := false
	next := func(context.Context, *Call) (json.RawMessage, error) {
		forwarded = true
		return json.RawMessage(`{}`), nil
	}
	c := testCall()
	c.View = view
	c.Route.Deny = wire.ToolError("denied by guardrail")
	raw, err := policyStage(s).Wrap(next)(t.Context(), c)
	if err != nil || string(raw) != string(c.Route.Deny) || forwarded || c.Record.Denial != "guardrail" {
		t.Fatalf("a denied tool: %s, %v, forwarded %v, denial %q", raw, err, forwarded, c.Record.Denial)
	}
	u := testCall()
	u.View, u.Route = view, nil
	if _, err := policyStage(s).Wrap(next)(t.Context(), u); err == nil || !strings.Contains(err.Error(), "unknown tool") || forwarded {
		t.Fatalf("an unknown tool: %v, forwarded %v", err, forwarded)
	}
	ok := testCall()
	ok.View = view
	if _, err := policyStage(s).Wrap(next)(t.Context(), ok); err != nil || !forwarded {
		t.Fatalf("an allowed tool: %v, forwarded %v", err, forwarded)
	}
}

// TestInterceptorsStage: interceptors see the call as made (who, which
// tool) and may answer it themselves; they run on the pinned runtime's
// list.
func TestInterceptorsStage(t *testing.T) {
	s := testRouter(t, Options{})
	var seen interceptor.Call
	rt := NewRuntime(&config.Config{})
	rt.Interceptors = []interceptor.Interceptor{func(ctx context.Context, c *interceptor.Call, next interceptor.Next) (json.RawMessage, error) {
		seen = *c
		if c.Tool == "s_blocked" {
			return wire.ToolError("blocked"), nil
		}
		return next(ctx)
	}}
	for _, e := range endings {
		c := testCall()
		c.Runtime = rt
		_, _ = runEnding(t, interceptorsStage(s), e, c)
		if seen.User != "alice" || seen.Thread != "th" || seen.Server != "s" || seen.Tool != "s_t" || seen.RawTool != "t" {
			t.Fatalf("%s: interceptor saw %+v", e.name, seen)
		}
	}
	c := testCall()
	c.Runtime, c.Route.Name = rt, "s_blocked"
	raw, err := interceptorsStage(s).Wrap(func(context.Context, *Call) (json.RawMessage, error) {
		t.Fatal("forwarded past an interceptor that answered")
		return nil, nil
	})(t.Context(), c)
	if err != nil || !wire.IsToolError(raw) {
		t.Fatalf("blocked: %s, %v", raw, err)
	}
}

// TestTasksStage: a call whose result is not a task passes unchanged in
// the legacy era, however it ends.
func TestTasksStage(t *testing.T) {
	s := testRouter(t, Options{})
	for _, e := range endings {
		c := testCall()
		c.Runtime = NewRuntime(&config.Config{})
		raw, err := runEnding(t, tasksStage(s), e, c)
		if e.name == "success" && (err != nil || string(raw) != `{"content":[]}`) {
			t.Fatalf("%s: %s, %v", e.name, raw, err)
		}
		if e.name != "success" && err == nil {
			t.Fatalf("%s: the failure was lost", e.name)
		}
	}
}

// TestAuditStage: one record per call however it ends, with who called,
// the tool and its server, and a denial a later stage noted; a secret in
// the arguments never reaches it.
func TestAuditStage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	a, err := audit.New(audit.Options{Enabled: true, Output: path, UserID: "plain", Log: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s := testRouter(t, Options{Audit: a})
	for _, e := range endings {
		c := testCall()
		c.Args = json.RawMessage(`{"token":"sk-live-SECRET-1234"}`)
		_, _ = runEnding(t, auditStage(s), e, c)
	}
	c := testCall()
	_, _ = auditStage(s).Wrap(func(_ context.Context, c *Call) (json.RawMessage, error) {
		c.noteRoute()
		c.Record.Deny("limit: too many")
		return wire.ToolError("too many"), nil
	})(t.Context(), c)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != len(endings)+1 {
		t.Fatalf("%d records for %d calls:\n%s", len(lines), len(endings)+1, b)
	}
	if strings.Contains(string(b), "sk-live-SECRET-1234") {
		t.Fatal("a secret in the arguments reached the audit trail")
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"tool": "s_t", "server": "s", "caller": "alice", "denial_reason": "limit: too many"}
	for k, v := range want {
		if fmt.Sprint(last[k]) != fmt.Sprint(v) {
			t.Errorf("record %s = %v, want %v (%s)", k, last[k], v, lines[len(lines)-1])
		}
	}
}

// TestCredentialsStage: a server without headers is passed through; a
// refused credential is the tools/call's tool error (recorded as a
// denial) and any other method's invalid-params error.
func TestCredentialsStage(t *testing.T) {
	s := testRouter(t, Options{})
	forwarded := 0
	next := func(context.Context, *Call) (json.RawMessage, error) { forwarded++; return json.RawMessage(`{}`), nil }
	if _, err := credentialsStage(s).Wrap(next)(t.Context(), testCall()); err != nil || forwarded != 1 {
		t.Fatalf("no headers: %v, forwarded %d", err, forwarded)
	}
	c := testCall()
	raw, err := c.credentialsRefused(&headers.DenyError{Msg: "the secret \"k\" was not carried"})
	if err != nil || !wire.IsToolError(raw) || c.Record.Denial != `credentials: the secret "k" was not carried` {
		t.Fatalf("a tools/call refused: %s, %v, %q", raw, err, c.Record.Denial)
	}
	p := testCall()
	p.Method = "prompts/get"
	if _, err := p.credentialsRefused(&headers.DenyError{Msg: "no"}); err == nil {
		t.Fatal("a prompts/get refused: no error")
	} else if r, ok := errors.AsType[refusal](err); !ok || r.err.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("a prompts/get refused: %v", err)
	}
}

// TestReadCacheStage: a read is kept for its result's ttlMs, per caller
// when private or when its server gets each caller's own credentials, and
// within the cache's bounds; an error or an input_required is not kept;
// every ending of the call passes through.
func TestReadCacheStage(t *testing.T) {
	s := testRouter(t, Options{})
	stage := readCacheStage(s)
	var runs atomic.Int64
	answer := `{"contents":[],"ttlMs":60000,"cacheScope":"public"}`
	read := func(user, server string, perCaller bool) {
		c := testCall()
		c.Method, c.Name, c.Caller = "resources/read", "doc://x", NewCaller(user, "")
		c.Backend = &Backend{Name: server, PerUser: perCaller, Config: &config.Server{}}
		if _, err := stage.Wrap(func(context.Context, *Call) (json.RawMessage, error) {
			runs.Add(1)
			return json.RawMessage(answer), nil
		})(t.Context(), c); err != nil {
			t.Fatal(err)
		}
	}
	read("alice", "s", false)
	read("bob", "s", false)
	if runs.Load() != 1 {
		t.Fatalf("a public result reached the server %d times for two callers", runs.Load())
	}
	read("alice", "per", true)
	read("bob", "per", true)
	read("bob", "per", true)
	if runs.Load() != 3 {
		t.Fatalf("a per-caller server's result: %d runs, want 3 (one per caller)", runs.Load())
	}
	answer = `{"resultType":"input_required","inputRequests":{},"ttlMs":60000}`
	read("carol", "ir", false)
	read("carol", "ir", false)
	if runs.Load() != 5 {
		t.Fatalf("an input_required was kept: %d runs", runs.Load())
	}
	// Bounded: past maxReadEntries the least recently used go.
	answer = `{"contents":[],"ttlMs":60000,"cacheScope":"private"}`
	for i := range maxReadEntries + 10 {
		read(fmt.Sprint("u", i), "many", false)
	}
	if n := s.reads.lru.Len(); n > maxReadEntries {
		t.Fatalf("%d results kept, bound %d", n, maxReadEntries)
	}
	for _, e := range endings[1:] {
		c := testCall()
		c.Method, c.Name = "resources/read", "doc://y"
		if raw, err := runEnding(t, stage, e, c); err == nil || raw != nil {
			t.Errorf("%s: %s, %v", e.name, raw, err)
		}
	}
}
