// Package modern is the sessionless 2026-07-28 protocol era on /mcp: the
// router's test of a request's era, server/discover, the fast path for
// tools/call and lists, subscriptions/listen, the multi-round-trip bridges
// (a parked call for a legacy upstream, sealed requestStates for a
// 2026-07-28 one) and the tasks extension. Every request is served on the
// call path both eras share (package callpath) with its own era value
// (*Era); package proxy routes requests here and wires the Handler.
package modern

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Options configure a Handler.
type Options struct {
	Log hclog.Logger
	// SDK is the mcp.Server both eras share; Send is its sending handler.
	SDK  *mcp.Server
	Send mcp.MethodHandler
	// Calls is the shared call path; Runtime where its runtimes are published.
	Calls   *callpath.Router
	Runtime *atomic.Pointer[callpath.Runtime]
	// Gate orders background work against shutdown; Life ends when
	// shutdown starts; Background is the work shutdown waits for.
	Gate       *callpath.Life
	Life       context.Context
	Background *sync.WaitGroup
	Panics     *panicguard.Guard
	// Tasks is the durable task service; nil when durable tasks are off.
	Tasks *taskpoll.Service
	// States seals requestStates when the config names no key.
	States *seal.Sealer
	// Replica names this process in the requestStates of parked calls.
	Replica string
	// Elsewhere serves a retry of a call parked on another replica there;
	// nil: such a retry is refused with an error that says so.
	Elsewhere func(w http.ResponseWriter, r *http.Request, body []byte, replica string)
	// Buffers are the response buffers the fast path writes with.
	Buffers *wire.Buffers
	// PageSize bounds prompts/list and resources/*list pages; 0 = one page.
	PageSize int
	// DisableFastPath sends every request through go-sdk's stateless handler.
	DisableFastPath bool
	// Telemetry starts the fast path's SERVER spans; nil: off.
	Telemetry *telemetry.Telemetry
}

// Handler serves the 2026-07-28 era.
type Handler struct {
	log       hclog.Logger
	calls     *callpath.Router
	rt        *atomic.Pointer[callpath.Runtime]
	sdk       *mcp.Server
	send      mcp.MethodHandler // the SDK's sending handler: listen notifications
	stateless http.Handler      // go-sdk's stateless handler (modern.go)
	gate      *callpath.Life
	life      context.Context
	bg        *sync.WaitGroup
	panics    *panicguard.Guard
	tasks     *taskpoll.Service
	buffers   *wire.Buffers
	pageSize  int
	noFast    bool
	tel       *telemetry.Telemetry

	listens   listens   // subscriptions/listen streams (listen.go)
	bridge    bridges   // calls that need client input (mrtr.go)
	capsCache capsCache // validated client capabilities (fastpath.go)
}

// New returns a Handler with opts, its task methods registered on the SDK
// server (tasks.go).
func New(opts Options) *Handler {
	s := &Handler{log: opts.Log, calls: opts.Calls, rt: opts.Runtime, sdk: opts.SDK, send: opts.Send,
		gate: opts.Gate, life: opts.Life, bg: opts.Background, panics: opts.Panics, tasks: opts.Tasks,
		buffers: opts.Buffers, pageSize: opts.PageSize, noFast: opts.DisableFastPath, tel: opts.Telemetry}
	s.listens = listens{log: s.log, rt: s.rt, calls: s.calls, send: s.send, gate: s.gate, life: s.life, bg: s.bg,
		panics: s.panics, tasks: s.tasks, capsCache: &s.capsCache}
	s.bridge = bridges{log: s.log, rt: s.rt, calls: s.calls, panics: s.panics,
		replica: opts.Replica, elsewhere: opts.Elsewhere}
	s.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.sdk },
		&mcp.StreamableHTTPOptions{Stateless: true, DisableLocalhostProtection: true, PropagateRequestCancellation: true})
	s.registerTaskMethods()
	return s
}

// Close cancels every parked call and parks no more (shutdown).
func (s *Handler) Close() { s.bridge.parked.closeAll() }

// ListsChanged tells the listeners that asked for them of list changes.
func (s *Handler) ListsChanged(tools, prompts, resources bool) {
	s.listens.listeners.changed(&s.listens, tools, prompts, resources)
}

// ResourceUpdated tells the listeners subscribed to p.URI of its update.
func (s *Handler) ResourceUpdated(p *mcp.ResourceUpdatedNotificationParams) {
	s.listens.listeners.resourceUpdated(&s.listens, p)
}

// TaskEvent sends a durable task's event to the listeners granted its task.
func (s *Handler) TaskEvent(e taskpoll.Event) { s.listens.listeners.taskEvent(&s.listens, e) }

// SetParkTTL sets how long a bridged call stays parked for its client's
// retry (stateTTL otherwise): for tests.
func (s *Handler) SetParkTTL(d time.Duration) {
	s.bridge.parked.mu.Lock()
	s.bridge.parked.ttl = d
	s.bridge.parked.mu.Unlock()
}
