package catalog

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Guardrails: DeerFlow's AllowlistProvider evaluated on visible tool names.
//
// Decisions depend only on the name and the config, so they are taken once
// per catalog build: a denied tool keeps its route (so a call to it gets the
// guardrail text instead of "unknown tool") but is left out of tools/list,
// tool_search and the instructions, and its call is answered with the
// precomputed error result (Route.Deny) without reaching the upstream.

// guard is the guardrails block compiled for one config.
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

// newGuard compiles a guardrails block.
func newGuard(g config.Guardrails) *guard {
	gd := &guard{enabled: g.Enabled, failClosed: g.FailClosed, allowed: nameSet(g.AllowedTools), denied: nameSet(g.DeniedTools)}
	gd.evaluate = gd.allowlist
	return gd
}

// nameSet returns names as a set; nil for a nil list, an empty set for an
// empty one (an empty, non-nil allowlist allows nothing).
func nameSet(names []string) map[string]bool {
	if names == nil {
		return nil
	}
	set := make(map[string]bool, len(names))
	for _, n := range names {
		set[n] = true
	}
	return set
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
// tool is allowed.
func (g *guard) check(name string, log hclog.Logger) json.RawMessage {
	if g == nil || !g.enabled {
		return nil
	}
	d, ok := g.decide(name, log)
	if !ok || d.allow {
		return nil
	}
	if d.code == "" {
		d.code, d.message = "oap.denied", "blocked by guardrail policy"
	}
	return wire.ToolError(fmt.Sprintf("Guardrail denied: tool '%s' was blocked (%s). Reason: %s. Choose an alternative approach.", name, d.code, d.message))
}

// decide evaluates name. An evaluation error (a failing or panicking
// provider) denies with oap.evaluator_error when fail_closed is set, and
// otherwise reports !ok: the tool is allowed. Both are logged.
func (g *guard) decide(name string, log hclog.Logger) (d guardDecision, ok bool) {
	d, err := g.safeEvaluate(name)
	switch {
	case err == nil:
		return d, true
	case !g.failClosed:
		log.Warn("guardrail evaluation failed; allowing the tool (fail_closed is false)", "tool", name, "err", err)
		return d, false
	}
	log.Warn("guardrail evaluation failed; denying the tool (fail_closed)", "tool", name, "err", err)
	return guardDecision{code: "oap.evaluator_error", message: "guardrail provider error (fail-closed)"}, true
}

// safeEvaluate runs the provider, turning a panic into an error.
func (g *guard) safeEvaluate(name string) (d guardDecision, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("guardrail provider panicked: %v", p)
		}
	}()
	return g.evaluate(name)
}
