package callpath

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// limitsStage checks every request a caller makes mcp-mux forward against
// the limits rules before it goes upstream (package ratelimit): a
// tools/call past a rule gets a tool error result, anything else the
// JSON-RPC error CodeLimited. An admitted call's calls-in-flight slots come
// back however it ends — answered, failed, cancelled, or its client gone —
// and while it waits parked for its client (LimitHold). Resource
// subscriptions take the same step outside the pipeline (AdmitSubscribe,
// AdmitForward); unsubscribing gives back and is never refused. Left out of
// a runtime whose config has no limits rules.
func limitsStage(s *Router) Stage {
	return Stage{
		Name:    "limits",
		Methods: AllMethods,
		Needed:  func(rt *Runtime) bool { return s.limits != nil && rt.Config != nil && len(rt.Config.Limits.Rules) > 0 },
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				tool, method := "", c.Method
				if c.Method == "tools/call" {
					tool, method = c.Route.Name, ""
				}
				d := s.admitLimits(ctx, c.Session, c.Backend.Name, tool, method)
				if !d.Allowed {
					c.Record.Deny("limit: " + d.Message)
					return LimitRefusal(c.Method, &d)
				}
				defer d.Release()
				return next(ctx, c)
			}
		},
	}
}

// CodeLimited is the JSON-RPC error code of a request other than
// tools/call refused by a limits rule (a tools/call gets a tool error
// result instead); its data carries the rule and retryAfter in seconds.
const CodeLimited = -32029

// admitLimits checks a request of st to server against the limits rules:
// a tools/call of tool, or (tool "") a request of method. An admitted
// call that holds calls-in-flight slots hands them to the LimitHold on
// ctx, if any, so that they are returned while it waits parked.
func (s *Router) admitLimits(ctx context.Context, st *Session, server, tool, method string) ratelimit.Decision {
	d := s.limits.Admit(ctx, ratelimit.Call{Caller: st.User, Server: server, Tool: tool, Method: method})
	if d.Allowed && d.Holds() {
		if h, _ := ctx.Value(limitHoldKey{}).(*LimitHold); h != nil {
			h.add(d)
		}
	}
	return d
}

// AdmitSubscribe is the limits step of st's resources/subscribe of uri:
// one request to the server that owns it in st's view (AdmitForward). A
// URI no server owns, or a durable task's, is not forwarded and not
// checked.
func (s *Router) AdmitSubscribe(ctx context.Context, st *Session, uri string) (release func(), refused *jsonrpc.Error) {
	if s.tasks != nil && strings.HasPrefix(uri, taskpoll.ResourcePrefix) {
		return func() {}, nil
	}
	b := s.rt.Load().View(st.Profile).ResourceOwner(uri)
	if b == nil {
		return func() {}, nil
	}
	return s.AdmitForward(ctx, st, b, "resources/subscribe")
}

// AdmitForward is the limits step of a request of method that st makes
// mcp-mux send to b outside Forward (a resource subscription). Refused,
// it returns the CodeLimited error; admitted, call release once b has
// answered.
func (s *Router) AdmitForward(ctx context.Context, st *Session, b *Backend, method string) (release func(), refused *jsonrpc.Error) {
	d := s.admitLimits(ctx, st, b.Name, "", method)
	if !d.Allowed {
		return nil, limitError(&d)
	}
	return d.Release, nil
}

// limitError is the JSON-RPC error of a refusal d.
func limitError(d *ratelimit.Decision) *jsonrpc.Error {
	data, _ := json.Marshal(struct {
		Limit      string `json:"limit"`
		Kind       string `json:"kind"`
		RetryAfter int    `json:"retryAfter"`
	}{d.Rule, d.Kind, d.RetryAfterSeconds()})
	return &jsonrpc.Error{Code: CodeLimited, Message: d.Message, Data: data}
}

// LimitRefusal is a limits refusal d as a request of method gets it: a
// tool error result for tools/call, else the CodeLimited error.
func LimitRefusal(method string, d *ratelimit.Decision) (json.RawMessage, error) {
	if method == "tools/call" {
		return wire.ToolError(d.Message), nil
	}
	return nil, limitError(d)
}

// LimitHold collects the limits admissions of a call that may wait parked
// for its client (package modern's bridged calls): Pause returns their
// calls-in-flight slots while it waits, Resume takes them again when the
// client's retry resumes it. A client that walks away holds none.
type LimitHold struct {
	mu sync.Mutex
	ds []ratelimit.Decision
}

type limitHoldKey struct{}

// WithLimitHold returns ctx carrying h: the limits step of the call run
// with it adds its admissions to h.
func WithLimitHold(ctx context.Context, h *LimitHold) context.Context {
	return context.WithValue(ctx, limitHoldKey{}, h)
}

func (h *LimitHold) add(d ratelimit.Decision) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ds = append(h.ds, d)
}

// Pause returns the slots of the call's admissions (ratelimit.Decision.Pause).
func (h *LimitHold) Pause() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.ds {
		h.ds[i].Pause()
	}
}

// Resume takes the slots of the call's admissions again before it goes
// on; refused by a rule, the call holds none and the refusal is returned
// (nil: admitted).
func (h *LimitHold) Resume(ctx context.Context) *ratelimit.Decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.ds {
		if d := h.ds[i].Resume(ctx); !d.Allowed {
			for j := range i {
				h.ds[j].Pause()
			}
			return &d
		}
	}
	return nil
}
