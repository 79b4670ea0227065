package callpath

// The guards stage: the built-in result guards (config result_guards, a
// server's own block replacing the top-level one). A tool's result is
// redacted of the credentials the mux knows and of credential-shaped
// strings, then held to its size budget — the smaller of the configured
// bound and a client's _meta["anthropic/maxResultSizeChars"] hint —
// truncated, refused, or spilled: kept whole, for its caller only, as the
// resource mux://results/<sealed id> the mux serves itself (package
// spill). The pure work is package resultguard's.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/resultguard"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/spill"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

const (
	// ResultsPrefix starts the URI of a spilled result.
	ResultsPrefix = "mux://results/"
	// resultTokenPrefix starts the sealed token after ResultsPrefix.
	resultTokenPrefix = "r1."
	// hintSetting names the client's hint in a marker or an error.
	hintSetting = `_meta["` + resultguard.HintKey + `"]`
)

// Actions of the guards (mcp_mux_result_guard_actions_total's action).
const (
	guardRedacted  = "redacted"
	guardTruncated = "truncated"
	guardSpilled   = "spilled"
	guardRefused   = "refused"
)

// GuardMetrics count what the result guards did, by server and action
// (mcp_mux_result_guard_actions_total).
type GuardMetrics struct {
	actions *prometheus.CounterVec
}

// NewGuardMetrics returns the metrics; register Collectors once.
func NewGuardMetrics() *GuardMetrics {
	return &GuardMetrics{actions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcp_mux_result_guard_actions_total",
		Help: "Tool results the result guards changed, by server and action (redacted, truncated, spilled, refused)."},
		[]string{"server", "action"})}
}

// Collectors are the metrics to register.
func (m *GuardMetrics) Collectors() []prometheus.Collector { return []prometheus.Collector{m.actions} }

// resultGuards keeps spilled results and seals their ids.
type resultGuards struct {
	store   spill.Store
	metrics *GuardMetrics
	log     hclog.Logger
	purpose atomic.Pointer[sealedPurpose] // the running runtime's sealer's
}

// sealedPurpose is the spill token purpose of one sealer.
type sealedPurpose struct {
	sealer *seal.Sealer
	p      *seal.Purpose
}

// newResultGuards returns the guards over store (nil: in this process).
func newResultGuards(store spill.Store, m *GuardMetrics, log hclog.Logger) *resultGuards {
	if store == nil {
		store = spill.NewLocal(nil)
	}
	if m == nil {
		m = NewGuardMetrics()
	}
	return &resultGuards{store: store, metrics: m, log: log}
}

// tokens is the purpose sealing result ids under sealer (a runtime's
// States: replicas sharing the key open each other's tokens).
func (g *resultGuards) tokens(sealer *seal.Sealer) *seal.Purpose {
	if sp := g.purpose.Load(); sp != nil && sp.sealer == sealer {
		return sp.p
	}
	sp := &sealedPurpose{sealer: sealer, p: sealer.Purpose("spilled result v1", resultTokenPrefix)}
	g.purpose.Store(sp)
	return sp.p
}

// guardsStage applies the result guards to a tools/call's result (see
// above). Left out when no result_guards block is configured.
func guardsStage(s *Router) Stage {
	return Stage{
		Name:    "guards",
		Methods: ToolCall,
		Needed:  guardsConfigured,
		Wrap: func(next CallFunc) CallFunc {
			return func(ctx context.Context, c *Call) (json.RawMessage, error) {
				if c.Backend == nil || c.Runtime == nil {
					return next(ctx, c)
				}
				g := c.Runtime.Config.ResultGuardsFor(c.Backend.Config)
				if budget, _ := g.Budget(); g == nil || (!g.Redact && budget == 0) { // none, or {}: off for the server
					return next(ctx, c)
				}
				raw, err := next(ctx, c)
				if err != nil {
					return raw, err
				}
				return s.guards.apply(ctx, c, g, raw)
			}
		},
	}
}

// guardsConfigured reports whether rt's config has a result_guards block.
func guardsConfigured(rt *Runtime) bool {
	if rt.Config == nil {
		return false
	}
	if rt.Config.ResultGuards != nil {
		return true
	}
	for _, b := range rt.Backends {
		if b.Config != nil && b.Config.ResultGuards != nil {
			return true
		}
	}
	return false
}

// guardReport is what the guards did to one result.
type guardReport struct {
	action     string // "" when the result was within its budget
	redactions int
	chars      int
	kept       int
}

// apply guards c's result raw under g. A result that is not a
// CallToolResult with content passes unchanged.
func (g *resultGuards) apply(ctx context.Context, c *Call, rg *config.ResultGuards, raw json.RawMessage) (json.RawMessage, error) {
	r, err := resultguard.Parse(raw)
	if err != nil {
		return raw, nil
	}
	var rep guardReport
	if rg.Redact {
		if rep.redactions = r.Redact(c.scrubber()); rep.redactions > 0 {
			g.count(c, guardRedacted)
		}
	}
	budget, setting := rg.Budget()
	if h := resultguard.Hint(c.Meta); budget > 0 && h > 0 && h < budget {
		budget, setting = h, hintSetting
	}
	rep.chars = r.Chars()
	rep.kept = rep.chars
	defer g.note(ctx, c, &rep)
	if budget == 0 || rep.chars <= budget {
		if rep.redactions == 0 {
			return raw, nil
		}
		return r.JSON()
	}
	switch rg.OnExceed {
	case config.OnExceedError:
		rep.action, rep.kept = guardRefused, 0
		g.count(c, guardRefused)
		return wire.ToolError(fmt.Sprintf("mcp-mux: the result of tool %q on MCP server %q is %d characters, over the bound of %d set by %s; nothing of it was returned.",
			c.Name, c.Backend.Name, rep.chars, budget, setting)), nil
	case config.OnExceedSpill:
		return g.spill(ctx, c, r, rg, budget, setting, &rep)
	}
	return g.truncate(c, r, budget, setting, "", &rep)
}

// truncate cuts r to budget with a marker naming setting (and uri, where
// the whole result was spilled).
func (g *resultGuards) truncate(c *Call, r *resultguard.Result, budget int, setting, uri string, rep *guardReport) (json.RawMessage, error) {
	structured := r.HasStructured()
	rep.kept = r.Truncate(budget)
	r.Append(resultguard.TextBlock(resultguard.Marker(rep.chars, rep.kept, setting, structured, uri)))
	if uri != "" {
		r.Append(resultguard.LinkBlock(uri, "full result of "+c.Name, fmt.Sprintf("The whole result of %s: %d characters (application/json CallToolResult).", c.Name, rep.chars)))
		rep.action = guardSpilled
	} else {
		rep.action = guardTruncated
	}
	g.count(c, rep.action)
	return r.JSON()
}

// spill keeps the whole (redacted) result for its caller and returns the
// head with a resource_link to it; a result too large to keep, or a store
// that fails, is truncated instead (the marker says so).
func (g *resultGuards) spill(ctx context.Context, c *Call, r *resultguard.Result, rg *config.ResultGuards, budget int, setting string, rep *guardReport) (json.RawMessage, error) {
	full, err := r.JSON()
	if err != nil {
		return nil, err
	}
	id := spill.NewID()
	if err := g.store.Put(ctx, c.Caller.User, id, full, rg.SpillTTL); err != nil {
		note := "; not kept: the spill store failed"
		if errors.Is(err, spill.ErrTooLarge) {
			note = fmt.Sprintf("; not kept: over %d bytes", spill.MaxResult)
		} else {
			reqid.Logger(ctx, g.log).Warn("result guards: spilling a result", "server", c.Backend.Name, "err", err)
		}
		return g.truncate(c, r, budget, setting+note, "", rep)
	}
	uri := ResultsPrefix + g.tokens(c.Runtime.States).Seal(c.Caller.User, []byte(id), rg.SpillTTL)
	return g.truncate(c, r, budget, setting, uri, rep)
}

// count adds one action of c's server.
func (g *resultGuards) count(c *Call, action string) {
	g.metrics.actions.WithLabelValues(c.Backend.Name, action).Inc()
}

// note puts what the guards did on ctx's span and c's audit record.
func (g *resultGuards) note(ctx context.Context, c *Call, rep *guardReport) {
	if rep.action == "" && rep.redactions == 0 {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("mcp_mux.result_guard.action", rep.action), attribute.Int("mcp_mux.result_guard.redactions", rep.redactions),
			attribute.Int("mcp_mux.result_guard.chars", rep.chars), attribute.Int("mcp_mux.result_guard.kept", rep.kept))
	}
	c.Record.ResultGuard = &audit.ResultGuard{Action: rep.action, Redactions: rep.redactions, Chars: rep.chars, Kept: rep.kept}
}

// read answers resources/read of a spilled result for its caller: any
// other caller, a token that does not open, or a result gone is "not
// found", alike.
func (g *resultGuards) read(ctx context.Context, rt *Runtime, user, uri string) (mcp.Result, error) {
	notFound := &jsonrpc.Error{Code: -32002, Message: "resource not found: no spilled result of this caller has that URI (it may have expired)"}
	tok := strings.TrimPrefix(uri, ResultsPrefix)
	id, err := g.tokens(rt.States).Open(tok, user)
	if err != nil {
		return nil, notFound
	}
	data, err := g.store.Get(ctx, user, string(id))
	if errors.Is(err, spill.ErrNotFound) {
		return nil, notFound
	}
	if err != nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the spilled results store is unavailable"}
	}
	type content struct {
		URI      string `json:"uri"`
		MimeType string `json:"mimeType"`
		Text     string `json:"text"`
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false) // the text as it was, not up to 6 times longer in \u escapes
	if err := enc.Encode(struct {
		Contents []content `json:"contents"`
	}{[]content{{URI: uri, MimeType: "application/json", Text: string(data)}}}); err != nil {
		return nil, fmt.Errorf("encoding a spilled result: %w", err)
	}
	return &mcpwire.RawResult{Raw: bytes.TrimRight(out.Bytes(), "\n")}, nil
}
