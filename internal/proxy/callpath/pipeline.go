package callpath

import (
	"context"
	"encoding/json"
	"net/http"

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
	// Route and Runtime may be set by an edge that looked the tool up
	// already (in Runtime's view of the caller's profile): it is not
	// looked up again unless the call ends up on another runtime.

	// Set by the stages.
	Runtime *Runtime        // session: the runtime the call finishes on
	View    *Catalog        // session: the caller's profile's view of it
	Route   *Route          // route: the tool called (nil for an unknown tool)
	Backend *Backend        // route: the server the call goes to
	Raw     string          // route: the tool's or prompt's name at its server
	Upward  json.RawMessage // arguments: the params sent upstream
	Record  audit.Entry     // audit: the call's record (zero when audit is off)

	upHeader http.Header                     // credentials: the upstream headers
	renew    func(ctx context.Context) error // credentials: after an upstream's 401, fresh headers
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
		s.auditStage(),        // audit.go: one record per tools/call, prompts/get, resources/read
		s.sessionStage(),      // admit.go: shutdown, the session's share, the pinned runtime and view
		s.routeStage(),        // route.go: the route, looked up once in the caller's view
		s.policyStage(),       // policy.go: guardrails, tool_search, mcp-mux's own task tools
		s.limitsStage(),       // limits.go: the limits rules; the slot comes back however the call ends
		s.outcomeStage(),      // outcome.go: an upstream's failure as the caller gets it
		s.contentStage(),      // content.go: arguments and result on the span and record, where opted in
		s.argumentsStage(),    // arguments.go: the params sent upstream (fixed arguments, own names, _meta)
		s.tasksStage(),        // tasks.go: a durable task's submit, a server's own task
		s.interceptorsStage(), // interceptors.go: the compiled-in interceptors
		s.credentialsStage(),  // credentials.go: the caller's upstream headers, renewed after a 401
	}
}

// pipeline is a runtime's assembled call pipeline, one chain per method.
type pipeline struct {
	chains [5]CallFunc // by bit of Methods
}

// assemble builds rt's pipeline from Stages: for each method, the stages
// that apply to it and that rt needs, in front of the terminal send.
func (s *Router) assemble(rt *Runtime) *pipeline {
	p := &pipeline{}
	stages := s.Stages()
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
	if p == nil {
		p = s.assemble(rt)
		if !rt.pipeline.CompareAndSwap(nil, p) {
			p = rt.pipeline.Load()
		}
	}
	c.Runtime = rt
	return p.chains[methodIndex(methodOf(c.Method))](ctx, c)
}

// methodIndex is the bit of m, a single method.
func methodIndex(m Methods) int {
	for i := range 5 {
		if m == Methods(1)<<i {
			return i
		}
	}
	return 4
}
