package callpath

import (
	"context"
	"encoding/json"
	"fmt"
	"math/bits"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// The call pipeline: every request mcp-mux forwards to an upstream — a
// tools/call, prompts/get, resources/read, completion/complete, or a
// request of the tasks extension for a server's own task — is one Call,
// built at the edge of its era and path, run through the stages Stages
// lists, in that order, down to the upstream. A stage is one concern in
// one file; it declares the methods it applies to and whether the
// runtime's configuration needs it (a stage that is not configured is
// left out of the assembled pipeline and costs nothing). A new feature is
// a new stage: one file and one line in Stages.

// ErrClosing answers a request that arrives while the server shuts down.
var ErrClosing = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "mcp-mux is shutting down"}

// Call is one request on its way to an upstream.
type Call struct {
	// Built at the edge.
	Method  string          // "tools/call", "prompts/get", …
	Session *Session        // the caller's session (its identity and era state)
	Era     Era             // the request's protocol era
	Sink    Sink            // where what the upstream sends meanwhile goes
	Key     upstream.Key    // the (user, thread) upstream sessions are scoped by
	Header  http.Header     // the inbound request's headers (token exchange's subject token)
	Caller  Caller          // who is calling: user, profile, carried secrets (parsed once)
	Name    string          // tools/call, prompts/get: the visible name; resources/read: the URI
	Args    json.RawMessage // tools/call: the caller's arguments
	Meta    json.RawMessage // tools/call: the caller's _meta
	Params  any             // any other method: the request's params as decoded
	// Named, when set, learns the tool's label for spans and metrics from
	// the route step (the name, or "_unknown" for one the view lacks).
	Named func(label string)

	// Set by the stages. Route and Runtime may be set by an edge that
	// looked the tool up already (in Runtime's view of the caller's
	// profile): it is not looked up again unless the call ends up on
	// another runtime.
	Runtime *Runtime        // session: the runtime the call finishes on
	View    *Catalog        // session: the caller's profile's view of it
	Route   *Route          // route: the tool called (nil for an unknown tool)
	Backend *Backend        // route: the server the call goes to
	Raw     string          // route: the tool's or prompt's name at its server
	Upward  json.RawMessage // arguments: the params sent upstream
	Applied json.RawMessage // arguments: tools/call: the arguments sent upstream (fixed ones set)
	Record  audit.Entry     // audit: the call's record (zero when audit is off)

	upHeader http.Header                     // credentials: the upstream headers
	renew    func(ctx context.Context) error // credentials: after an upstream's 401, fresh headers
	back     returnPath                      // arguments: where what the upstream sends meanwhile goes (sink.go)
}

// CallFunc runs a Call from one stage on and returns the upstream's raw
// result or the error the caller gets.
type CallFunc func(ctx context.Context, c *Call) (json.RawMessage, error)

// Methods is a set of the methods a stage applies to.
type Methods uint8

// The methods of the pipeline.
const (
	ToolCall Methods = 1 << iota
	PromptGet
	ResourceRead
	Completion
	Other // a request of the tasks extension for a server's own task

	AllMethods = ToolCall | PromptGet | ResourceRead | Completion | Other
)

// methodOf is the pipeline method of a JSON-RPC method.
func methodOf(method string) Methods {
	switch method {
	case "tools/call":
		return ToolCall
	case "prompts/get":
		return PromptGet
	case "resources/read":
		return ResourceRead
	case "completion/complete":
		return Completion
	}
	return Other
}

// Stage is one named step of the call pipeline.
type Stage struct {
	Name    string
	Methods Methods
	// Needed reports whether rt's configuration uses the stage; nil: always.
	Needed func(rt *Runtime) bool
	// Wrap returns the stage in front of next.
	Wrap func(next CallFunc) CallFunc
}

// Stages is the call pipeline, outermost first. The terminal step after
// the last stage sends the call (upstream.go).
func (s *Router) Stages() []Stage {
	return []Stage{
		auditStage(s),        // audit.go: one record per tools/call, prompts/get, resources/read
		sessionStage(s),      // pipeline.go: shutdown, the session's share, the pinned runtime and view
		routeStage(s),        // pipeline.go: the route, looked up once in the caller's view
		appsStage(s),         // apps.go: MCP Apps' ui:// URIs as listed, each read sent with its server's own
		policyStage(s),       // policy.go: guardrails, tool_search, mcp-mux's own task tools
		skillsStage(s),       // skills.go: skill URIs mapped both ways, skills the guardrails hide
		pinsStage(s),         // pins.go: a changed tool of a pin_tools block server, refused until accepted
		limitsStage(s),       // limits.go: the limits rules; the slot comes back however the call ends
		outcomeStage(s),      // upstream.go: an upstream's failure as the caller gets it
		contentStage(s),      // content.go: arguments and result on the span and record, where opted in
		guardsStage(s),       // guards.go: result_guards: redaction and the size budget of a tool's result
		processorsStage(s),   // processors.go: the external processors on the arguments and the result
		argumentsStage(s),    // arguments.go: the params sent upstream (fixed arguments, own names, _meta)
		authorizeStage(s),    // authorize.go: policy.rules (CEL) and policy.authzen on what the call asks
		approvalsStage(s),    // approvals.go: a human's yes before a call an approvals rule matches
		tasksStage(s),        // tasks.go: a durable task's submit, a server's own task
		interceptorsStage(s), // interceptors.go: the compiled-in interceptors
		credentialsStage(s),  // credentials.go: the caller's upstream headers, renewed after a 401
		accountsStage(s),     // accounts.go: the caller's own token on a connected-account server; consent
		readCacheStage(s),    // readcache.go: a read answered within the ttlMs its server gave, per caller when private
	}
}

// methodCount is how many methods Methods has.
const methodCount = 5

// pipeline is a runtime's assembled call pipeline, one chain per method.
type pipeline struct {
	chains [methodCount]CallFunc // by bit of Methods
	apps   bool                  // assembled while the runtime's catalog had MCP Apps (apps.go)
}

// assemble builds rt's pipeline from stages (Stages): for each method,
// the stages that apply to it and that rt needs, in front of the terminal
// send.
func (s *Router) assemble(rt *Runtime, stages []Stage) *pipeline {
	p := &pipeline{apps: rt.hasApps()}
	for i := range p.chains {
		m := Methods(1) << i
		next := s.send
		for j := len(stages) - 1; j >= 0; j-- {
			st := stages[j]
			if st.Methods&m == 0 || (st.Needed != nil && !st.Needed(rt)) {
				continue
			}
			next = st.Wrap(next)
		}
		p.chains[i] = next
	}
	return p
}

// Run runs c through the pipeline of its method, as the current runtime
// (or c.Runtime, the one the edge looked c.Route up in) assembled it; the
// session stage pins that runtime for the call (or, when a reload retired
// it meanwhile, the newest).
func (s *Router) Run(ctx context.Context, c *Call) (json.RawMessage, error) {
	rt := c.Runtime
	if rt == nil {
		rt = s.rt.Load()
	}
	p := rt.pipeline.Load()
	if p == nil || p.apps != rt.hasApps() { // the apps stage comes and goes with the catalog's apps
		np := s.assemble(rt, s.Stages())
		if rt.pipeline.CompareAndSwap(p, np) {
			p = np
		} else {
			p = rt.pipeline.Load()
		}
	}
	c.Runtime = rt
	return p.chains[bits.TrailingZeros8(uint8(methodOf(c.Method)))](ctx, c)
}

// sessionStage admits the call on its session and pins its runtime: it is
// refused while mcp-mux shuts down (ErrClosing) or when the session has
// as many requests in flight as it may (admission.Calls), is cancelled
// with the session, and finishes on the runtime it started on — with the
// caller's profile's view of its catalog — whatever a reload does
// meanwhile. What it takes it gives back however the call ends.
func sessionStage(s *Router) Stage {
	return Stage{
		Name:    "session",
		Methods: AllMethods,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if !s.life.Begin() {
					return nil, ErrClosing
				}
				defer s.life.Done()
				ctx, done, err := s.Admit(ctx, c.Session)
				if err != nil {
					return nil, err
				}
				defer done()
				rt := s.pin(c.Runtime)
				defer rt.leave()
				if rt != c.Runtime {
					c.Runtime, c.Route = rt, nil // a route the edge found belongs to a retired runtime
				}
				c.View = c.Runtime.View(c.Caller.Profile)
				return next(ctx, c)
			}
		},
	}
}

// pin registers a call on rt, the runtime its pipeline was assembled
// from, or on the current runtime when a reload retired rt meanwhile;
// the caller calls leave on the one returned.
func (s *Router) pin(rt *Runtime) *Runtime {
	if rt != nil && rt.enter() {
		return rt
	}
	return s.enter()
}

// ViewOf is profile's view of cat: the one place a caller's profile
// selects what it sees.
func ViewOf(cat *Catalog, profile string) *Catalog {
	return cat.For(profile)
}

// View is profile's view of rt's current catalog.
func (rt *Runtime) View(profile string) *Catalog {
	return ViewOf(rt.Catalog.Load(), profile)
}

// Admit starts one request of the session st (admission.Calls.Admit).
func (s *Router) Admit(ctx context.Context, st *Session) (context.Context, func(), error) {
	return st.inflight.Admit(ctx, s.maxCalls)
}

// routeStage looks the call's target up, once, in the caller's view of
// the pinned runtime: a tool's route (nil for a name the catalog does not
// know: the policy stage decides), a prompt's, the server that owns a
// resource or completes a reference, or — for a request that named its
// server — that server as this runtime has it.
func routeStage(s *Router) Stage {
	return Stage{
		Name:    "route",
		Methods: AllMethods,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if err := c.route(); err != nil {
					return nil, err
				}
				c.noteRoute()
				return next(ctx, c)
			}
		},
	}
}

// route sets c.Route and c.Backend from c.View, or returns the error the
// caller gets for a target nobody serves.
func (c *Call) route() error {
	switch c.Method {
	case "tools/call":
		var err error
		if c.Route == nil {
			c.Route = c.View.Lookup(c.Name)
			err = c.appCall() // apps.go: else an app's call by its server's own tool name
		}
		if c.Route != nil {
			c.Backend, c.Raw = c.Route.Server, c.Route.Raw
		}
		if c.Named != nil {
			c.Named(c.View.ToolLabel(c.Name, c.Route))
		}
		return err
	case "prompts/get":
		p := c.View.Prompt(c.Name)
		if p == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", c.Name)}
		}
		c.Backend, c.Raw = p.Server, p.Raw
	case "resources/read":
		if c.Backend = c.View.ResourceOwner(c.Name); c.Backend == nil {
			return &jsonrpc.Error{Code: -32002, Message: fmt.Sprintf("resource not found: %q", c.Name)}
		}
	case "completion/complete":
		return c.routeCompletion()
	default:
		if c.Backend == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "no MCP server named"}
		}
		cur := c.Runtime.ByName[c.Backend.Name]
		if cur == nil {
			return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("MCP server %q is no longer configured", c.Backend.Name)}
		}
		c.Backend = cur // c.Backend came from an older catalog: use this runtime's
	}
	return nil
}

// routeCompletion sets the server that completes the call's reference,
// turning a prompt's visible name into its own in a copy of the params.
func (c *Call) routeCompletion() error {
	p, _ := c.Params.(*mcp.CompleteParams)
	if p == nil || p.Ref == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "missing ref"}
	}
	q, ref := *p, *p.Ref
	q.Ref = &ref
	switch ref.Type {
	case "ref/prompt":
		if r := c.View.Prompt(ref.Name); r != nil {
			ref.Name, c.Backend = r.Raw, r.Server
		}
	case "ref/resource":
		c.Backend = c.View.ResourceOwner(ref.URI)
	}
	if c.Backend == nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no server completes %s %q", ref.Type, ref.Name+ref.URI)}
	}
	c.Params = &q
	return nil
}

// promptArgsLen is the size of a prompts/get's arguments, as recorded.
func promptArgsLen(params any) int {
	p, _ := params.(*mcp.GetPromptParams)
	if p == nil || len(p.Arguments) == 0 {
		return 0
	}
	b, _ := json.Marshal(p.Arguments)
	return len(b)
}
