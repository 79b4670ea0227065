// Package proxy is the downstream side of mcp-mux: one Streamable HTTP MCP
// endpoint that aggregates every configured upstream and serves both
// protocol eras: stateful 2025-11-25 sessions here, the sessionless
// 2026-07-28 revision in package modern, both on the call path of package
// callpath. proxy routes each request to its era (fastpath.go for the HTTP
// handler, middleware.go for the SDK's) and wires the rooms together.
//
// A Server holds one runtime (config, backends, catalog) behind an atomic
// pointer. Apply builds a new runtime off to the side, keeping backends whose
// connection settings did not change, swaps it in, and closes what it
// replaced; in-flight calls finish on the runtime they started on.
package proxy

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/accounts"
	"github.com/mcp-mux/mcp-mux/internal/admission"
	"github.com/mcp-mux/mcp-mux/internal/approvals"
	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
	"github.com/mcp-mux/mcp-mux/internal/panicguard"
	"github.com/mcp-mux/mcp-mux/internal/processor"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/modern"
	"github.com/mcp-mux/mcp-mux/internal/proxy/retryfwd"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessions"
	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
	"github.com/mcp-mux/mcp-mux/internal/spill"
	"github.com/mcp-mux/mcp-mux/internal/subscriptions"
	"github.com/mcp-mux/mcp-mux/internal/taskpoll"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
	"github.com/mcp-mux/mcp-mux/internal/via"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Options configure a Server.
type Options struct {
	Logger  hclog.Logger
	Version string
	// MaxSessionCalls caps the requests one downstream session runs at
	// once (tools/call, prompts/get, resources/read, completion); default 64.
	MaxSessionCalls int
	// BodyTimeout bounds reading one request body; default 30s.
	BodyTimeout time.Duration
	// IdleConnTimeout closes a keep-alive connection without a request for
	// this long (HTTPServer); default 2m.
	IdleConnTimeout time.Duration
	// RetryMin and RetryMax bound the rediscovery backoff of a failed upstream.
	RetryMin, RetryMax time.Duration
	// StdioSupervisor is upstream.Options.Supervisor for every stdio server.
	StdioSupervisor string
	// PageSize bounds prompts/list and resources/*list pages; 0 = one page.
	PageSize int
	// TaskStore turns durable tasks on (mcp_tasks.enabled): the Server runs
	// a taskpoll.Service on it with TaskConfig, polling from the first
	// Apply. The caller closes the store after Close.
	TaskStore  taskpoll.Store
	TaskConfig taskpoll.Config
	// DrainTimeout bounds how long a runtime replaced by Apply waits for the
	// calls that started on it before closing its upstreams; default 2m.
	DrainTimeout time.Duration
	// ServerChange, when set, is asked before Apply reconnects, removes or
	// disables a running server (next is nil for the last two). An error
	// keeps that server at its running settings, reports the error's text as
	// the server's reload problem, and lets the rest of the reload proceed.
	ServerChange func(running, next *config.Server) error
	// SwapWait bounds how long Apply waits for new and reconnected upstreams
	// to finish their first discovery before it swaps the new runtime in
	// (their tools are served from then on); default 5s, negative: no wait.
	SwapWait time.Duration
	// ThreadlessIdle is how long a legacy session that names no thread (its
	// thread is its own session id) may sit with no request in flight and
	// no open stream before its stdio call sessions are closed, so that
	// one-shot clients leave no process behind; default 15s.
	ThreadlessIdle time.Duration
	// SessionRecheck is how often a replica checks the 2025-11-25 sessions
	// it keeps against their records in a shared store, so that a change
	// or end whose notice was lost is seen within it; default 10s.
	SessionRecheck time.Duration
	// DisableModernFastPath sends every 2026-07-28 request through go-sdk's
	// stateless handler (package modern): for comparisons, and as an
	// escape hatch.
	DisableModernFastPath bool
	// SessionStore opens where 2025-11-25 sessions live, given the
	// Server's handlers: nil keeps them in this process (one replica); a
	// sessionstore.Redis shares them with every replica on that Redis. The
	// Server closes the store on Close.
	SessionStore func(sessionstore.Options) sessionstore.Store
	// ResidentIdle is how long a session's SDK side stays in memory with
	// no request (package sessionhost); default sessionhost.DefaultResidentIdle.
	ResidentIdle time.Duration
	// Telemetry configures OpenTelemetry (package telemetry): the MCP
	// metrics are served on /metrics always, spans and OTLP export when it
	// is enabled. Its Registerer is the Server's.
	Telemetry telemetry.Options
	// Audit records each tools/call, prompts/get and resources/read and
	// keeps the recent slow and failed ones (nil: none); its owner closes it.
	Audit *audit.Auditor
	// StateKey seals requestStates when the config names no
	// inbound.request_state_key: replicas that share it open each other's
	// (sessionstore.SharedKey); empty, each process makes its own.
	StateKey string
	// LimitStore shares the limits rules' budgets with every replica on
	// that Redis (package ratelimit); nil keeps them in this process. The
	// Server closes its client on Close.
	LimitStore *ratelimit.Store
	// UpstreamTransport carries every HTTP upstream's requests (nil: a
	// pooled http.Transport per upstream); for embedding and tests.
	UpstreamTransport http.RoundTripper
	// AccountStore keeps connected accounts (package accounts: Redis or
	// the embedded file); nil: none. With inbound.public_url set, the
	// engine runs on it (accounts.go). Its owner closes it after Close.
	AccountStore accounts.Store
	// ApprovalStore opens where the approvals rules' requests live
	// (package approvals: Redis or the embedded file), at first use; nil:
	// no store, and a call an approvals rule matches is refused.
	ApprovalStore func() (approvals.Store, error)
	// SpillStore keeps the results the result guards spill (package
	// spill: Redis, shared by the replicas on it); nil: in this process.
	SpillStore spill.Store
	// Pins checks the tool definitions of servers with pin_tools against
	// their pins (package toolpin: in Redis or the embedded file, opened
	// at first use); nil: none, and pin_tools has no effect. Its owner
	// closes it after Close.
	Pins *toolpin.Guard
	// PinPoll is how often a replica rereads the pins of the changes it
	// lists (default 5 s), to learn of one accepted on another replica.
	PinPoll time.Duration
	// AccountHTTPClient makes the connected accounts' discovery,
	// registration and token requests (nil: the engine's bounded client).
	AccountHTTPClient *http.Client
}

// Server is the mcp-mux MCP server.
type Server struct {
	opts Options
	log  hclog.Logger

	rt      atomic.Pointer[callpath.Runtime]
	applyMu sync.Mutex
	catMu   sync.Mutex

	sdk       *mcp.Server
	send      mcp.MethodHandler // captured sending handler: in-request notifications
	modern    *modern.Handler   // the 2026-07-28 era (package modern)
	via       *via.Marker       // this process in the requests it sends upstream (internal/via)
	states    *seal.Sealer      // requestState key without inbound.request_state_key
	buffers   wire.Buffers      // request and response bodies (requests.go, fastpath.go)
	sessions  *sessions.Table   // 2025-11-25 sessions (package sessions)
	recv      receiver          // the SDK's receiving middleware (middleware.go)
	fwd       forwarder         // every upstream's handler (forward.go)
	requests  requestTable      // SDK-path HTTP requests (requests.go)
	metrics   *metrics
	panics    *panicguard.Guard       // internal/panicguard, recover.go
	replica   string                  // this process among the replicas (sessionstore.NewReplica)
	subs      *subscriptions.Registry // resource subscriptions by server (package subscriptions)
	bodies    *admission.Bodies       // request body bounds (requests.go)
	calls     *callpath.Router        // the call path both eras share (package callpath)
	gate      callpath.Life           // orders session registration and calls against Close
	accounts  accountsPort            // connected accounts (accounts.go)
	approvals approvalDesk            // the approvals rules' requests (approvals.go)
	pins      pinDesk                 // pinned tool definitions (pins.go)
	publicURL string                  // the inbound.public_url the engine was made with
	applied   atomic.Bool             // a config has been applied
	ready     atomic.Bool             // …and its servers discovered (becomeReady)
	life      context.Context         // ends when Close starts
	draining  atomic.Bool             // Drain was called: not ready
	retry     retryfwd.Forwarder      // retries of calls parked on other replicas
	started   time.Time
	stop      context.CancelFunc
	bg        sync.WaitGroup

	refs    *runtimeRefs // upstreams and resolvers by the runtimes holding them (apply.go)
	reloads reloadLog

	tasks   *taskpoll.Service // nil: durable tasks off (tasks.go)
	tel     *telemetry.Telemetry
	durable taskBridge         // the task service's lifecycle and events (tasks.go)
	limits  *ratelimit.Limiter // the limits rules (package ratelimit)
	policy  *callpath.PolicyMetrics
	// processors counts the external processors' decisions (package processor).
	processors *processor.Metrics
}

// New returns a Server with no upstreams; call Apply to configure it.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.MaxSessionCalls <= 0 {
		opts.MaxSessionCalls = defaultMaxSessionCalls
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = defaultBodyTimeout
	}
	if opts.IdleConnTimeout <= 0 {
		opts.IdleConnTimeout = defaultIdleConnTimeout
	}
	s := &Server{opts: opts, log: opts.Logger, started: time.Now(), via: via.New()}
	s.refs = newRuntimeRefs(opts.DrainTimeout, s.log)
	s.metrics = newMetrics(s)
	s.panics = panicguard.New(s.log, s.metrics.reg)
	s.subs = subscriptions.New(subscriptions.Options{UnsubscribeTimeout: callpath.NotifyTimeout})
	s.bodies = admission.NewBodies(admission.BodyOptions{Max: callpath.MaxBody, Timeout: opts.BodyTimeout, Buffers: &s.buffers, Log: s.log})
	s.reloads.register(s.metrics.reg)
	opts.Telemetry.Registerer, opts.Telemetry.Gatherer = s.metrics.reg, s.metrics.reg
	s.tel = telemetry.Start(opts.Telemetry, s.log)
	s.policy = callpath.NewPolicyMetrics()
	s.metrics.reg.MustRegister(s.policy.Collectors()...)
	s.processors = processor.NewMetrics()
	s.metrics.reg.MustRegister(s.processors.Collectors()...)
	guards := callpath.NewGuardMetrics()
	s.metrics.reg.MustRegister(guards.Collectors()...)
	if err := opts.Audit.Register(s.metrics.reg); err != nil {
		s.log.Error("audit: the record counters are off", "err", err)
	}
	// The SDK's capabilities gate nothing mcp-mux relies on: initialize and
	// discover results get the catalog's (middleware.go, package modern).
	s.sdk = mcp.NewServer(&mcp.Implementation{Name: "mcp-mux", Version: opts.Version}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Completions: &mcp.CompletionCapabilities{},
			Logging:     &mcp.LoggingCapabilities{},
		},
	})
	if err := callpath.RegisterSkillMethods(s.sdk); err != nil { // the skills extension's methods
		s.log.Error("skills: the extension's methods are off", "err", err)
	}
	s.sdk.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler { s.send = next; return next })
	s.sdk.AddReceivingMiddleware(s.recv.middleware)
	// Added last, so outermost: a handler's panic is its request's error (internal/panicguard).
	s.sdk.AddReceivingMiddleware(s.panics.Middleware)
	var ctx context.Context
	ctx, s.stop = context.WithCancel(context.Background())
	s.life = ctx
	s.states = seal.New(opts.StateKey)
	if opts.TaskStore != nil {
		svc, err := taskpoll.New(taskpoll.Options{Store: opts.TaskStore, Caller: &callpath.TaskCaller{Runtime: &s.rt, Panics: s.panics, Telemetry: s.tel, Accounts: &s.accounts}, Config: opts.TaskConfig,
			Logger: s.log.Named("tasks"), Registerer: s.metrics.reg})
		if err != nil {
			s.log.Error("durable tasks are off", "err", err)
		} else {
			s.tasks = svc
			s.durable.svc = svc
			s.durable.cancel = svc.Subscribe(s.durable.event)
		}
	}
	// The limits rules arrive with Apply; a limiter that cannot start leaves them off.
	var err error
	if s.limits, err = ratelimit.New(ratelimit.Options{Store: opts.LimitStore, Registerer: s.metrics.reg, Log: s.log.Named("limits")}); err != nil {
		s.log.Error("limits are off", "err", err)
	}
	s.approvals.setUp(s, opts)
	s.calls = callpath.New(callpath.Options{Log: s.log, MaxSessionCalls: opts.MaxSessionCalls, Tasks: s.tasks, Runtime: &s.rt, Life: &s.gate,
		PageSize: opts.PageSize, Subs: s.subs, Panics: s.panics, Audit: opts.Audit, Telemetry: s.tel, Limits: s.limits,
		Accounts: &s.accounts, Approvals: s.approvals.m, IDs: s.approvals.ids, Spill: opts.SpillStore, GuardMetrics: guards})
	replica := sessionstore.NewReplica()
	s.replica = replica
	s.accounts.log, s.accounts.rt, s.accounts.store, s.accounts.hc = s.log.Named("accounts"), &s.rt, opts.AccountStore, opts.AccountHTTPClient
	s.openSessions(opts, replica)
	s.modern = modern.New(modern.Options{Log: s.log, SDK: s.sdk, Send: s.send, Calls: s.calls, Runtime: &s.rt,
		Gate: &s.gate, Life: s.life, Background: &s.bg, Panics: s.panics, Tasks: s.tasks, States: s.states, Replica: replica, Elsewhere: s.retry.Elsewhere, Telemetry: s.tel,
		Buffers: &s.buffers, PageSize: opts.PageSize, DisableFastPath: opts.DisableModernFastPath})
	s.durable.log, s.durable.panics, s.durable.sessions, s.durable.modern, s.durable.bg = s.log, s.panics, s.sessions, s.modern, &s.bg
	s.recv = receiver{rt: &s.rt, via: s.via, requests: &s.requests, sessions: s.sessions, calls: s.calls, modern: s.modern, tel: s.tel}
	s.fwd = forwarder{sessions: s.sessions, modern: s.modern}
	none, _ := inbound.New(inbound.Options{Mode: inbound.ModeNone})
	origins, _ := newOriginPolicy(nil, nil)
	empty := callpath.NewRuntime(&config.Config{})
	empty.Policy, empty.Auth, empty.Origins, empty.States = callpath.NewCatalogPolicy(&config.Config{}, s.tasks != nil), none, origins, s.states
	empty.Catalog.Store(callpath.BuildCatalog(nil, empty.Policy, nil, s.log))
	s.rt.Store(empty)
	s.pins.setUp(s, opts) // its watch builds the catalog: after everything that does is set
	s.bg.Go(func() { s.sessions.Run(ctx) })
	return s
}

// openSessions sets up the 2025-11-25 session table (package sessions):
// its store (opts' or one in process), its host of resident SDK sessions,
// and the retries of parked calls that travel through its store.
func (s *Server) openSessions(opts Options, replica string) {
	s.retry = retryfwd.Forwarder{Serve: s.mcpHandler(), Log: s.log}
	o := sessions.Options{Replica: replica, Store: opts.SessionStore, Retry: &s.retry, SDK: s.sdk, Send: s.send, ResidentIdle: opts.ResidentIdle,
		Gate: &s.gate, Runtime: &s.rt, Calls: s.calls, Log: s.log, Telemetry: s.tel, ThreadlessIdle: opts.ThreadlessIdle, Recheck: opts.SessionRecheck}
	if opts.StateKey != "" { // shared through the store: kept there, and adopted when another replica made a new one
		o.SharedKey, o.OnSharedKey = opts.StateKey, s.states.Rekey
	}
	s.sessions = sessions.New(o)
}

// Handler returns the HTTP handler: /mcp, /healthz, /readyz and /metrics
// (to whom admin.metrics says: metricsGate), all behind the Host and Origin
// checks (GuardHosts).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mcpH := reqid.Tag(s.via.Guard(s.authenticate(s.mcpHandler()), via.GuardOptions{Log: s.log, RequestID: requestID}))
	mux.Handle("/mcp", mcpH)
	mux.Handle("/mcp/{profile}", mcpH) // a profile's view (package profile)
	meta := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h := s.rt.Load().Auth.MetadataHandler(); h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
	})
	mux.Handle(inbound.MetadataPath, meta)
	mux.Handle(inbound.MetadataPath+"/mcp", meta)
	mux.HandleFunc("GET /oauth/callback", s.accounts.serve)
	mux.HandleFunc("GET /oauth/client-metadata.json", s.accounts.serve)
	mux.Handle("DELETE /oauth/connections/{server}", s.authenticate(http.HandlerFunc(s.accounts.serveDisconnect)))
	mux.HandleFunc("GET /healthz", serveHealth)
	mux.HandleFunc("GET /readyz", s.serveReady)
	mux.Handle("GET /metrics", s.metricsGate(s.metrics.handler()))
	return s.panics.Handler(s.GuardHosts(mux))
}

// WaitDiscovery blocks until every backend finished its first discovery
// attempt (each bounded by its session_init_timeout) or ctx ends.
func (s *Server) WaitDiscovery(ctx context.Context) error {
	for _, b := range s.rt.Load().Backends {
		select {
		case <-b.Up.Discovered():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Close drains in-flight calls (bounded by ctx), closes downstream sessions
// and every upstream, killing stdio process groups.
func (s *Server) Close(ctx context.Context) error {
	s.gate.Close()
	s.durable.stop(ctx)
	s.stop()
	s.bg.Wait()
	s.modern.Close()
	done := make(chan struct{})
	go func() { s.gate.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.log.Warn("shutdown: abandoning in-flight calls")
	}
	// What this replica holds for each session goes (the sessions live on
	// in their records), before the upstreams do.
	if err := s.sessions.Close(ctx); err != nil {
		s.log.Warn("shutdown: sessions", "err", err)
	}
	if err := s.limits.Close(); err != nil {
		s.log.Warn("shutdown: limits", "err", err)
	}
	if m := s.accounts.m.Load(); m != nil {
		if err := m.Close(); err != nil {
			s.log.Warn("shutdown: connected accounts", "err", err)
		}
	}
	s.approvals.close()
	if err := s.tel.Shutdown(ctx); err != nil {
		s.log.Warn("shutdown: telemetry", "err", err)
	}
	// Runtimes replaced by reloads close now, then the current one.
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	s.refs.close(s.rt.Load())
	return nil
}
