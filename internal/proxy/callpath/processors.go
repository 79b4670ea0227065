package callpath

// The processors stage: the external processors (config "processors",
// top level then the called server's own; package processor) are asked
// about a tools/call before it goes on (phase request: they see the
// caller's arguments, before fixed arguments are set) and about its
// result before the stages before this one and the caller see it (phase
// response). A deny is a tool error naming the processor and its reason;
// a mutate replaces the arguments or the result. Each decision and its
// latency goes on the call's span and into its audit record.

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/processor"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// processorsStage asks the call's processors about it (processors.go).
// Left out when no processor is configured.
func processorsStage(s *Router) Stage {
	return Stage{
		Name:    "processors",
		Methods: ToolCall,
		Needed:  func(rt *Runtime) bool { return rt.Processors != nil },
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				l := c.Runtime.Processors.For(c.Backend.Name)
				if len(l) == 0 || c.Route == nil {
					return next(ctx, c)
				}
				return processorGate{ids: s.ids, log: s.log}.run(ctx, c, l, next)
			}
		},
	}
}

// processorGate runs a call's processors.
type processorGate struct {
	ids *secret.IDHash
	log hclog.Logger
}

// run asks l about c before next (phase request) and about next's result
// (phase response).
func (g processorGate) run(ctx context.Context, c *Call, l processor.List, next CallFunc) (json.RawMessage, error) {
	tool := c.Route.Name
	if l.Has(processor.Request, tool) {
		out := l.Run(ctx, tool, g.call(ctx, c, processor.Request, c.Args, nil))
		if res, done, err := g.decided(ctx, c, out); done {
			return res, err
		}
		if out.Mutated {
			c.Args = out.Payload
		}
	}
	raw, err := next(ctx, c)
	if err != nil || !l.Has(processor.Response, tool) || !completeResult(raw) {
		return raw, err
	}
	out := l.Run(ctx, tool, g.call(ctx, c, processor.Response, nil, raw))
	if res, done, err := g.decided(ctx, c, out); done {
		return res, err
	}
	return out.Payload, nil
}

// call is what the processors are told about c in phase.
func (g processorGate) call(ctx context.Context, c *Call, phase string, args, result json.RawMessage) processor.Call {
	if phase == processor.Request && len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	return processor.Call{Phase: phase, Method: c.Method, Caller: g.ids.Of(c.Caller.User), Server: c.Backend.Name, Tool: c.Raw,
		Arguments: args, Result: result, RequestID: reqid.From(ctx)}
}

// decided notes out on c's span and record and, when it ends the call
// (a deny, the call's context ending), returns the caller's answer.
func (g processorGate) decided(ctx context.Context, c *Call, out processor.Outcome) (json.RawMessage, bool, error) {
	for _, n := range out.Notes {
		ms := float64(n.Latency.Microseconds()) / 1000
		c.Record.Processors = append(c.Record.Processors, audit.Processor{Name: n.Name, Phase: n.Phase, Action: n.Action, MS: ms})
		telemetry.Event(ctx, "mcp_mux.processor", attribute.String("mcp_mux.processor.name", n.Name),
			attribute.String("mcp_mux.processor.phase", n.Phase), attribute.String("mcp_mux.processor.action", n.Action),
			attribute.Float64("mcp_mux.processor.duration", n.Latency.Seconds()))
		if n.Action == processor.ErrorAllowed || n.Action == processor.ErrorDenied {
			reqid.Logger(ctx, g.log).Warn("an external processor did not answer", "processor", n.Name, "phase", n.Phase,
				"server", c.Backend.Name, "on_error_allows", n.Action == processor.ErrorAllowed)
		}
	}
	switch {
	case out.Err != nil:
		return nil, true, out.Err
	case out.DeniedBy == "":
		return nil, false, nil
	}
	what := "call"
	if len(out.Notes) > 0 && out.Notes[len(out.Notes)-1].Phase == processor.Response {
		what = "result"
	}
	msg := fmt.Sprintf("Error: tool %q: processor %q denied the %s", c.Route.Name, out.DeniedBy, what)
	switch {
	case out.Failed:
		msg = fmt.Sprintf("Error: tool %q: processor %q could not decide (%s); the %s is denied", c.Route.Name, out.DeniedBy, out.Reason, what)
	case out.Reason != "":
		msg += ": " + out.Reason
	}
	c.Record.Deny("processor: " + out.DeniedBy)
	return wire.ToolError(msg), true, nil
}

// completeResult reports whether raw is a tools/call's final result (not
// a 2026-07-28 input_required or task answer): what a response-phase
// processor sees.
func completeResult(raw json.RawMessage) bool {
	complete := true
	ok := wire.MemberValues(raw, func(name string, value []byte) bool {
		if name == "resultType" {
			complete = string(value) == `"complete"`
		}
		return complete
	})
	return ok && complete
}

// Processors is a runtime's external processors, built: for each server,
// the top-level list then the server's own. Nil when none is configured.
type Processors struct {
	top      processor.List
	byServer map[string]processor.List
	clients  map[string]*processor.Client // by list and name: kept across reloads when unchanged
}

// For is the list asked about the calls to server.
func (p *Processors) For(server string) processor.List {
	if l, ok := p.byServer[server]; ok {
		return l
	}
	return p.top
}

// NewProcessors builds rt's processors (the top level's of rt.Config,
// each backend's own from its Config); nil when there are none. A running
// runtime's client (old, may be nil) with unchanged settings is kept, with
// its connections and its concurrency slots.
func NewProcessors(rt *Runtime, old *Processors, m *processor.Metrics) *Processors {
	p := &Processors{byServer: map[string]processor.List{}, clients: map[string]*processor.Client{}}
	p.top = p.list("", rt.Config.Processors, old, m)
	for _, b := range rt.Backends {
		if b.Config == nil || len(b.Config.Processors) == 0 {
			continue
		}
		own := p.list(b.Name, b.Config.Processors, old, m)
		p.byServer[b.Name] = append(append(processor.List{}, p.top...), own...)
	}
	if len(p.clients) == 0 {
		return nil
	}
	return p
}

// list builds the processors cfg of one list (scope: "" for the top
// level, a server's name).
func (p *Processors) list(scope string, cfg []config.Processor, old *Processors, m *processor.Metrics) processor.List {
	l := make(processor.List, 0, len(cfg))
	for _, pc := range cfg {
		key := scope + "\x00" + pc.Name
		o := processor.Options{Name: pc.Name, URL: pc.URL.Reveal(), Timeout: pc.Timeout, MaxBody: pc.MaxBodyBytes,
			MaxConcurrent: pc.MaxConcurrent, FailOpen: pc.FailOpen, Metrics: m}
		cl := old.client(key)
		if !cl.Same(o) {
			cl = processor.New(o)
		}
		p.clients[key] = cl
		l = append(l, processor.Step{Client: cl, Tools: pc.Tools, Request: pc.Request(), Response: pc.Response()})
	}
	return l
}

// client is the client of key; nil for none.
func (p *Processors) client(key string) *processor.Client {
	if p == nil {
		return nil
	}
	return p.clients[key]
}

// Retire closes the idle connections of p's clients that next does not
// keep.
func (p *Processors) Retire(next *Processors) {
	if p == nil {
		return
	}
	for k, c := range p.clients {
		if next.client(k) != c {
			c.Close()
		}
	}
}
