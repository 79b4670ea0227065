package proxy

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Guardrails: DeerFlow's AllowlistProvider evaluated on visible tool names.
//
// Decisions depend only on the name and the config, so they are taken once
// per catalog build: a denied tool keeps its route (so a call to it gets the
// guardrail text instead of "unknown tool") but is left out of tools/list,
// tool_search and the instructions, and its call is answered with the
// precomputed error result without reaching the upstream.

// guard is the guardrails block compiled for one runtime.
type guard struct {
	enabled    bool
	failClosed bool
	allowed    map[string]bool // nil: every tool is allowed
	denied     map[string]bool
	// evaluate is the policy provider: the built-in allowlist, which cannot
	// fail. Tests replace it to exercise fail_closed.
	evaluate func(name string) (guardDecision, error)
}

// guardDecision is a provider's verdict with DeerFlow's OAP reason.
type guardDecision struct {
	allow         bool
	code, message string
}

func newGuard(g config.Guardrails) *guard {
	gd := &guard{enabled: g.Enabled, failClosed: g.FailClosed, denied: make(map[string]bool, len(g.DeniedTools))}
	if g.AllowedTools != nil { // an empty, non-nil list allows nothing
		gd.allowed = make(map[string]bool, len(g.AllowedTools))
		for _, n := range g.AllowedTools {
			gd.allowed[n] = true
		}
	}
	for _, n := range g.DeniedTools {
		gd.denied[n] = true
	}
	gd.evaluate = gd.allowlist
	return gd
}

// allowlist is DeerFlow's AllowlistProvider: the allowlist first, then the
// denylist, so a tool in both is denied.
func (g *guard) allowlist(name string) (guardDecision, error) {
	if g.allowed != nil && !g.allowed[name] {
		return guardDecision{code: "oap.tool_not_allowed", message: fmt.Sprintf("tool '%s' not in allowlist", name)}, nil
	}
	if g.denied[name] {
		return guardDecision{code: "oap.tool_not_allowed", message: fmt.Sprintf("tool '%s' is denied", name)}, nil
	}
	return guardDecision{allow: true, code: "oap.allowed"}, nil
}

// check returns the tool error result a call to name gets, or nil when the
// tool is allowed. An evaluation error (a failing or panicking provider)
// denies with oap.evaluator_error when fail_closed is set and allows
// otherwise; both are logged.
func (g *guard) check(name string, log hclog.Logger) json.RawMessage {
	if g == nil || !g.enabled {
		return nil
	}
	d, err := g.safeEvaluate(name)
	if err != nil {
		if !g.failClosed {
			log.Warn("guardrail evaluation failed; allowing the tool (fail_closed is false)", "tool", name, "err", err)
			return nil
		}
		log.Warn("guardrail evaluation failed; denying the tool (fail_closed)", "tool", name, "err", err)
		d = guardDecision{code: "oap.evaluator_error", message: "guardrail provider error (fail-closed)"}
	}
	if d.allow {
		return nil
	}
	if d.code == "" {
		d.code, d.message = "oap.denied", "blocked by guardrail policy"
	}
	return wire.ToolError(fmt.Sprintf("Guardrail denied: tool '%s' was blocked (%s). Reason: %s. Choose an alternative approach.", name, d.code, d.message))
}

func (g *guard) safeEvaluate(name string) (d guardDecision, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("guardrail provider panicked: %v", p)
		}
	}()
	return g.evaluate(name)
}

// policy answers the calls mcp-mux decides itself, before anything is
// forwarded: tool_search, guardrail-denied tools and deferred tools the
// session has not promoted. It reports whether it handled the call; r is the
// catalog route for name, or nil.
func (s *Server) policy(ctx context.Context, st *session, k sink, cat *catalog, r *route, name string, args json.RawMessage) (json.RawMessage, bool) {
	switch {
	case r == nil:
		if cat.search != nil && name == toolSearchName {
			return s.toolSearch(ctx, st, k, cat, args), true
		}
		return nil, false
	case r.deny != nil:
		s.logFor(ctx).Info("guardrail denied a tool call", "tool", name, "session", st.id)
		return r.deny, true
	case cat.search != nil && !st.modern && !st.promo.has(cat, name):
		// A modern caller's lists never depend on earlier calls, so a
		// deferred tool needs no promotion there (README: tool_search).
		return deferredError(name), true
	}
	return nil, false
}
