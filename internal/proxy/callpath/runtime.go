package callpath

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
	"github.com/mcp-mux/mcp-mux/internal/interceptor"
	"github.com/mcp-mux/mcp-mux/internal/profile"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/toolpin"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Runtime is everything built from one config.
type Runtime struct {
	Config       *config.Config
	Backends     []*Backend          // enabled servers, config order
	ByName       map[string]*Backend // Backends by server name
	Policy       *CatalogPolicy      // what the catalogs take from Config
	Catalog      atomic.Pointer[Catalog]
	Auth         *inbound.Authenticator // caller identity (inbound.auth)
	Profiles     *profile.Selector      // the caller's profile (config "profiles"); nil: none
	Origins      OriginCheck            // Host and Origin checks
	Interceptors []interceptor.Interceptor
	Authz        *Authz            // the policy block (authorize.go); nil: none
	Processors   *Processors       // the external processors (processors.go); nil: none
	States       *seal.Sealer      // seals 2026-07-28 requestStates and task ids
	Skipped      map[string]string // enabled servers that could not be set up: the reason
	// Warnings are Config's warnings and those of setting it up (skipped
	// interceptors), one text each, as the status page lists them.
	Warnings []string

	pipeline atomic.Pointer[pipeline] // the call pipeline, assembled on first use (Router.Run)

	mu      sync.Mutex
	calls   int           // calls in flight that started on this runtime
	retired bool          // replaced by a newer runtime
	idle    chan struct{} // closed once retired with no calls in flight
}

// OriginCheck is a runtime's Host and Origin guard of /mcp.
type OriginCheck interface {
	// Check returns why r is refused, or nil.
	Check(r *http.Request) error
}

// Backend is one enabled server and its upstream connection.
type Backend struct {
	Name        string // the server's configured name
	Prefix      bool   // its tools are named with a server prefix
	Fingerprint string // config.Server.Fingerprint of the upstream's settings
	HeaderKey   string // headerKey of the resolver's inputs
	Up          *upstream.Upstream
	Config      *config.Server    // this runtime's settings: routing, tools, description
	Resolver    *headers.Resolver // upstream headers (http/sse); nil when there are none
	Base        *ResolverRef      // the resolver Up's own requests use
	Metrics     *CallMetrics
	// PerUser marks a server where each caller connects their own account
	// (oauth grant_type authorization_code): the accounts stage.
	PerUser bool
	// Detect marks a server configured with no credentials that becomes
	// one when it asks for a Bearer token (with connected accounts on).
	Detect bool
	// Pins checks the server's tool definitions against their pins under
	// its pin_tools (pins.go); nil when mcp-mux keeps no pins.
	Pins *toolpin.Guard
}

// NewRuntime returns an empty runtime for cfg.
func NewRuntime(cfg *config.Config) *Runtime {
	return &Runtime{Config: cfg, ByName: make(map[string]*Backend), Skipped: make(map[string]string), idle: make(chan struct{})}
}

// Add appends b to rt's backends.
func (rt *Runtime) Add(b *Backend) {
	rt.Backends = append(rt.Backends, b)
	rt.ByName[b.Name] = b
}

// enter registers a call on rt; false when rt was retired meanwhile.
func (rt *Runtime) enter() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.retired {
		return false
	}
	rt.calls++
	return true
}

// leave ends a call registered by enter; the last call on a retired
// runtime lets it be released.
func (rt *Runtime) leave() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.calls--
	if rt.calls == 0 && rt.retired {
		close(rt.idle)
	}
}

// ResolverRef is the resolver an upstream's own requests (discovery,
// control sessions) take their headers from; it is shared by the runtimes
// that share the upstream, and follows the newest one.
type ResolverRef struct {
	p atomic.Pointer[headers.Resolver]
}

// BaseHeaders returns the newest resolver's base headers; none without one.
func (r *ResolverRef) BaseHeaders(ctx context.Context) (http.Header, error) {
	if res := r.p.Load(); res != nil {
		return res.Base(ctx)
	}
	return nil, nil
}

// Unauthorized tells the newest resolver that the headers sent were refused.
func (r *ResolverRef) Unauthorized(sent http.Header) {
	if res := r.p.Load(); res != nil {
		res.UnauthorizedHeader(sent)
	}
}

// The catalog (package catalog) as this package uses it: routes lead to a
// *Backend.
type (
	// Catalog is the aggregated catalog of one runtime.
	Catalog = catalog.Catalog[*Backend]
	// Route is one visible tool and where calls to it go.
	Route = catalog.Route[*Backend]
	// Promotions are the deferred tools one session promoted.
	Promotions = catalog.Promotions[*Backend]
	// CatalogPolicy is what a runtime's catalogs take from its config.
	CatalogPolicy = catalog.Policy
)

// NewCatalogPolicy compiles what a catalog takes from cfg besides each
// backend's own *config.Server: guardrails, tool_search and profiles; tasks is
// whether durable tasks are on.
func NewCatalogPolicy(cfg *config.Config, tasks bool) *CatalogPolicy {
	return catalog.NewPolicy(catalog.Options{Guardrails: cfg.Guardrails, ToolSearch: cfg.ToolSearch, Tasks: tasks, Profiles: cfg.Profiles})
}

// ConnectsAccounts reports whether each caller connects their own account
// on b: configured so, or detected (a, nil for no connected accounts).
func (b *Backend) ConnectsAccounts(a Accounts) bool {
	return b.PerUser || b.Detect && a != nil && a.Detected(b.Name)
}

// BuildCatalog builds the catalog of the backends' last discoveries,
// each server's tools checked against their pins first (pins.go)
// (accounts tells which connect their callers' accounts; nil: none).
func BuildCatalog(backends []*Backend, pol *CatalogPolicy, accounts Accounts, log hclog.Logger) *Catalog {
	src := make([]catalog.Source[*Backend], len(backends))
	var pins *toolpin.Guard
	names := make([]string, len(backends))
	for i, b := range backends {
		src[i] = catalog.Source[*Backend]{Server: b, Name: b.Name, Prefix: b.Prefix, Config: b.Config, Lists: b.lists(),
			Accounts: b.ConnectsAccounts(accounts)}
		names[i] = b.Name
		if b.Pins != nil {
			pins = b.Pins
		}
	}
	if pins != nil {
		pins.Retain(names) // a removed server's changes are no longer listed
	}
	return catalog.Build(src, pol, log)
}

// CallMetrics are one server's pre-resolved series, so that recording a
// call costs no label lookups.
type CallMetrics struct {
	OK, Failed       prometheus.Counter
	OKDur, FailedDur prometheus.Observer
}

// record counts one call that started at start and ended with err; the
// trace of ctx's sampled span is the duration's exemplar.
func (c *CallMetrics) record(ctx context.Context, start time.Time, err error) {
	d := time.Since(start).Seconds()
	obs, count := c.OKDur, c.OK
	if err != nil {
		obs, count = c.FailedDur, c.Failed
	}
	count.Inc()
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := obs.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(d, prometheus.Labels{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()})
			return
		}
	}
	obs.Observe(d)
}

// Retire marks rt as replaced and returns a channel closed once the calls
// that started on it have finished.
func (rt *Runtime) Retire() <-chan struct{} {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.retired = true
	if rt.calls == 0 {
		close(rt.idle)
	}
	return rt.idle
}

// Set makes res the resolver the upstream's own requests use.
func (r *ResolverRef) Set(res *headers.Resolver) { r.p.Store(res) }

// SetCapabilities puts the catalog's capabilities into an initialize or
// server/discover result. Extensions are each added by their own file after
// it (package modern's advertiseTasks), on server/discover only.
func SetCapabilities(cat *Catalog, res mcp.Result) {
	caps := cat.Capabilities() // a copy: the catalog's pointers are never written
	switch r := res.(type) {
	case *mcp.InitializeResult:
		r.Capabilities = &caps
	case *mcp.DiscoverResult:
		r.Capabilities = &caps
	}
}
