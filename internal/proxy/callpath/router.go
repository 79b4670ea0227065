// Package callpath is the call path both protocol eras share: the call
// pipeline — one Call per request forwarded to an upstream, built at the
// edge with its Caller, run through the stages Router.Stages lists (one
// file each: audit, policy, pins, limits, content, guards, processors, arguments, authorize, tasks,
// interceptors, credentials, with the session, route and outcome steps of
// the pipeline itself), assembled once per runtime without the stages its
// configuration does not need — and what it runs on: the runtime built
// from one config and its backends, the era-neutral session record, the
// sinks and return paths that carry what an upstream sends during a call
// back to its caller, and the SDK path's method table (Dispatch).
//
// What differs between the eras is the Era a caller passes with each
// request: LegacyEra here, the 2026-07-28 one in package modern.
package callpath

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/spill"
	"github.com/mcp-mux/mcp-mux/internal/subscriptions"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// NotifyTimeout bounds sending one notification to a client.
const NotifyTimeout = 10 * time.Second

// Options configure a Router.
type Options struct {
	Log hclog.Logger
	// MaxSessionCalls caps the requests one session runs at once.
	MaxSessionCalls int
	// Tasks is the durable task service; nil when durable tasks are off.
	Tasks *taskpoll.Service
	// Runtime is where the runtime a call starts on is published.
	Runtime *atomic.Pointer[Runtime]
	// Life orders calls against shutdown.
	Life *Life
	// PageSize bounds prompts/list and resources/*list pages; 0 = one page.
	PageSize int
	// Subs holds the sessions' resource subscriptions by server.
	Subs *subscriptions.Registry
	// Panics recovers a fast path's call (GuardedRun).
	Panics *panicguard.Guard
	// Audit records each tools/call, prompts/get and resources/read (nil: none).
	Audit *audit.Auditor
	// Telemetry gives a durable task its submit's trace context (nil: none).
	Telemetry *telemetry.Telemetry
	// Limits checks calls against the limits rules (nil: none).
	Limits *ratelimit.Limiter
	// Accounts connects callers' own accounts (nil: none).
	Accounts Accounts
	// Approvals keeps the approvals rules' requests (nil: approvals off).
	Approvals *approvals.Manager
	// IDs hashes callers as external processors see them (the spans' and
	// audit records' IDHash); nil: a random key of the Router's own.
	IDs *secret.IDHash
	// Spill keeps the results the result guards spill (nil: in this
	// process); GuardMetrics counts what the guards do (nil: unregistered).
	Spill        spill.Store
	GuardMetrics *GuardMetrics
}

// Router routes the calls of both eras to their backends.
type Router struct {
	log       hclog.Logger
	maxCalls  int
	tasks     *taskpoll.Service
	rt        *atomic.Pointer[Runtime]
	life      *Life
	pageSize  int
	subs      *subscriptions.Registry
	panics    *panicguard.Guard
	audit     *audit.Auditor
	tel       *telemetry.Telemetry
	limits    *ratelimit.Limiter
	accounts  Accounts
	approvals *approvals.Manager
	ids       *secret.IDHash
	guards    *resultGuards // the result guards' spilled results (guards.go)
	reads     readCache     // reads kept for the ttlMs their servers gave (readcache.go)
}

// New returns a Router with opts.
func New(opts Options) *Router {
	if opts.IDs == nil {
		opts.IDs = secret.NewIDHash("")
	}
	return &Router{log: opts.Log, maxCalls: opts.MaxSessionCalls, tasks: opts.Tasks, rt: opts.Runtime, life: opts.Life,
		pageSize: opts.PageSize, subs: opts.Subs, panics: opts.Panics, audit: opts.Audit, tel: opts.Telemetry, limits: opts.Limits,
		accounts: opts.Accounts, approvals: opts.Approvals, ids: opts.IDs, guards: newResultGuards(opts.Spill, opts.GuardMetrics, opts.Log)}
}

// logFor is the logger for a line about the request ctx belongs to
// (internal/reqid).
func (s *Router) logFor(ctx context.Context) hclog.Logger { return reqid.Logger(ctx, s.log) }

// enter returns the current runtime with a call registered on it; the
// caller calls leave on it when the call has finished.
func (s *Router) enter() *Runtime {
	for {
		if rt := s.rt.Load(); rt.enter() {
			return rt
		}
	}
}

// MaxBody bounds a /mcp request body, as the SDK's default MaxRequestBodyBytes.
const MaxBody = 4 << 20
