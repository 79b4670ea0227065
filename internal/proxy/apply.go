package proxy

// Apply: how a config change reaches the running server.
//
// A new runtime is built beside the running one and swapped in with one
// atomic store. What becomes of each server is decided by reload.Plan (pure,
// table-tested in proxy/reload) and carried out here by an execution; the
// config → options mapping lives in proxy/reload/options.go. Per server,
// Apply does the least it can:
//
//   - connection settings unchanged (config.Server.Fingerprint): the new
//     runtime shares the running upstream, its sessions and stdio processes;
//     when the header inputs (headers, oauth, user_auth, headers_from_context)
//     are unchanged too, it shares the header resolver and so keeps its OAuth
//     token. Presentation-only changes (description, routing, tools,
//     guardrails, tool_search) therefore never touch an upstream;
//   - changed: a new upstream is started (it discovers in the background,
//     bounded by Options.SwapWait, before the swap);
//   - added: likewise; removed: nothing in the new runtime refers to it;
//   - invalid in the new file but running: the running one is kept (last
//     good settings) and the problem is reported;
//   - refused by Options.ServerChange (or the task rule, taskBridge.change): the
//     running one is kept, with the reason reported;
//   - its resolver or upstream cannot be set up: it is skipped (reported in
//     the runtime's skipped servers); a running one whose new resolver
//     cannot be built keeps its running settings.
//
// Upstreams and resolvers are reference-counted by the runtimes that hold
// them. A replaced runtime is retired: once the calls that started on it have
// finished (bounded by Options.DrainTimeout, and cut short by Close), it drops
// its references, and whatever no runtime holds any more is closed (stdio
// process groups killed). Close waits for those closes.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/catalog"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
	"github.com/mcp-mux/mcp-mux/internal/interceptor"
	"github.com/mcp-mux/mcp-mux/internal/profile"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/reload"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// defaultDrainTimeout bounds how long a replaced runtime waits for the calls
// that started on it before its upstreams are closed anyway.
const defaultDrainTimeout = 2 * time.Minute

// defaultSwapWait bounds how long Apply waits for new upstreams' first
// discovery before swapping the runtime in.
const defaultSwapWait = 5 * time.Second

// Apply makes cfg the running configuration (see the top of this file).
// Problems with single servers are logged and never fail Apply; it fails only
// when the inbound settings cannot be built, and then nothing changes.
// Apply never fails because an upstream is down.
func (s *Server) Apply(cfg *config.Config) error {
	problems, err := s.apply(cfg, false)
	if err != nil {
		return err
	}
	for _, p := range problems {
		s.log.Warn("config change not applied", "server", p.Server, "reason", p.Message)
	}
	return nil
}

// ResetUpstreams re-discovers every server: each gets a new upstream (its
// pooled sessions and stdio processes are closed once the calls in flight on
// them finish). Header resolvers, and so OAuth tokens, are kept.
func (s *Server) ResetUpstreams() {
	s.applyMu.Lock()
	cfg := s.rt.Load().Config
	s.applyMu.Unlock()
	_, _ = s.apply(cfg, true) // the running config's inbound settings already built once
}

// apply builds and swaps in the runtime for cfg and returns the per-server
// problems (servers kept at their running settings). fresh makes every
// server get a new upstream.
func (s *Server) apply(cfg *config.Config, fresh bool) ([]config.Problem, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.gate.Closed() {
		return nil, fmt.Errorf("server is closed")
	}
	ex := &execution{s: s, old: s.rt.Load()}
	if err := ex.build(cfg); err != nil {
		return nil, err
	}
	s.accounts.setUp(cfg, ex.rt.States, s.replica)
	refuse := func(running, next *config.Server) error { return s.refuse(running, next, fresh) }
	ex.run(reload.Plan(runningView(ex.old), cfg, reload.Options{Fresh: fresh, Refuse: refuse}))
	ex.swap()
	return ex.problems, nil
}

// execution is one apply: it builds the new runtime beside the running one
// (old), carries out the plan's actions on it and swaps it in.
type execution struct {
	s        *Server
	old, rt  *callpath.Runtime
	problems []config.Problem
	// started are the backends with a new upstream, to start before the swap.
	started []*callpath.Backend
	// resolverChanged share a running upstream but have a new resolver,
	// which the upstream's own requests take up at the swap.
	resolverChanged []*callpath.Backend
}

// build makes the new runtime for cfg, with no backends yet: its inbound
// settings (authentication, origins), interceptors, catalog policy,
// requestState sealer and policy block. It fails when the inbound
// settings or the policy rules cannot be built.
func (ex *execution) build(cfg *config.Config) error {
	s := ex.s
	auth, err := s.newAuthenticator(cfg)
	if err != nil {
		return fmt.Errorf("inbound.auth: %w", err)
	}
	origins, err := newOriginPolicy(cfg.Inbound.AllowedHosts, cfg.Inbound.AllowedOrigins)
	if err != nil {
		return err
	}
	icepts, ipro := interceptor.Build(cfg.Interceptors, interceptor.Options{Logger: s.log, User: s.opts.Audit.Caller})
	for _, p := range ipro {
		s.log.Warn("skipping interceptor", "reason", p)
	}
	rt := callpath.NewRuntime(cfg)
	rt.Policy, rt.Auth, rt.Interceptors, rt.Origins = callpath.NewCatalogPolicy(cfg, s.tasks != nil), auth, icepts, origins
	for _, w := range cfg.Warnings {
		rt.Warnings = append(rt.Warnings, w.Error())
	}
	rt.Warnings = append(rt.Warnings, interceptorWarnings(ipro)...)
	rt.Profiles = profile.New(cfg)
	s.durable.warnSettings(ex.old.Config, cfg)
	rt.States = s.states
	if k := cfg.Inbound.RequestStateKey; !k.IsZero() {
		rt.States = seal.New(k.Reveal())
	}
	if rt.Authz, err = callpath.NewAuthz(cfg, ex.old.Authz, s.policy); err != nil {
		return err
	}
	ex.rt = rt
	return nil
}

// runningView is the plan's view of rt's backends, in order.
func runningView(rt *callpath.Runtime) []reload.Running {
	out := make([]reload.Running, len(rt.Backends))
	for i, b := range rt.Backends {
		out[i] = reload.Running{Name: b.Name, Fingerprint: b.Fingerprint, HeaderKey: b.HeaderKey, Server: b.Config}
	}
	return out
}

// refuse is the plan's Refuse: the task rule (taskBridge.change), then
// Options.ServerChange, on whether the running settings (nil: next is
// added) may become next (nil: removed or disabled). ServerChange is asked
// only where the server is reconnected, removed or disabled.
func (s *Server) refuse(running, next *config.Server, fresh bool) error {
	if err := s.durable.change(running, next); err != nil {
		return err
	}
	if s.opts.ServerChange == nil || running == nil || next != nil && !fresh && running.Fingerprint() == next.Fingerprint() {
		return nil
	}
	return s.opts.ServerChange(running, next)
}

// run carries out the actions in order.
func (ex *execution) run(actions []reload.Action) {
	for i := range actions {
		a := &actions[i]
		switch a.Kind {
		case reload.Refuse:
			if a.Prev < 0 { // an added server, left out
				ex.problems = append(ex.problems, config.Problem{Server: a.Name, Message: a.Problem})
				continue
			}
			ex.keepRunning(ex.old.Backends[a.Prev], a.Problem)
		case reload.Skip:
			ex.keepRunning(ex.old.Backends[a.Prev], a.Problem)
		case reload.Keep, reload.Reconnect:
			ex.connect(a)
		}
	}
}

// prev returns the running backend a starts from; nil for none.
func (ex *execution) prev(a *reload.Action) *callpath.Backend {
	if a.Prev < 0 {
		return nil
	}
	return ex.old.Backends[a.Prev]
}

// keepRunning keeps the running backend prev in the new runtime unchanged and
// reports why.
func (ex *execution) keepRunning(prev *callpath.Backend, problem string) {
	ex.problems = append(ex.problems, config.Problem{Server: prev.Name, Message: problem})
	b := *prev
	b.Metrics = ex.s.metrics.forServer(b.Name)
	ex.rt.Add(&b)
}

// connect sets up a server that runs on: its resolver, then its shared or
// new upstream. A server whose resolver cannot be built is skipped, and
// holds its running settings when it has them.
func (ex *execution) connect(a *reload.Action) {
	prev := ex.prev(a)
	res, err := ex.resolver(a, prev)
	if err != nil {
		ex.skip(a.Name, err)
		if prev != nil {
			ex.keepRunning(prev, err.Error()+"; kept the running settings")
		}
		return
	}
	if a.Kind == reload.Keep {
		ex.share(a, prev, res)
		return
	}
	ex.reconnect(a, res)
}

// resolver returns a's header resolver: the running one, a new one, or nil.
func (ex *execution) resolver(a *reload.Action, prev *callpath.Backend) (*headers.Resolver, error) {
	switch a.Resolver {
	case reload.ReuseResolver:
		return prev.Resolver, nil // keeps the OAuth token and any fetch in flight
	case reload.NewResolver:
		o := *a.Headers
		o.Logger = ex.s.log.Named("headers").With("server", a.Name)
		return headers.New(o)
	}
	return nil, nil
}

// skip records that a server could not be set up.
func (ex *execution) skip(name string, err error) {
	ex.s.log.Warn("skipping upstream server", "server", name, "reason", err)
	ex.rt.Skipped[name] = err.Error()
}

// share puts the running upstream of prev in the new runtime with a's
// settings and resolver res.
func (ex *execution) share(a *reload.Action, prev *callpath.Backend, res *headers.Resolver) {
	b := *prev
	b.Prefix, b.Config, b.Resolver, b.HeaderKey = a.Next.ToolNamePrefix, a.Next, res, a.HeaderKey
	b.PerUser, b.Detect = perUser(a.Next), ex.s.accounts.on() && detectable(a.Next)
	b.Metrics, b.Pins = ex.s.metrics.forServer(a.Name), ex.s.pins.g
	ex.rt.Add(&b)
	if res != prev.Resolver {
		ex.resolverChanged = append(ex.resolverChanged, &b)
	}
}

// reconnect puts a new upstream for a in the new runtime, with resolver
// res; a server whose upstream cannot be made is skipped (and a resolver
// built for it closed).
func (ex *execution) reconnect(a *reload.Action, res *headers.Resolver) {
	ref := &callpath.ResolverRef{}
	ref.Set(res)
	up, err := upstream.New(ex.s.upstreamOptions(a.Next, ref))
	if err != nil {
		if a.Resolver == reload.NewResolver {
			res.Close()
		}
		ex.skip(a.Name, err)
		return
	}
	b := &callpath.Backend{Name: a.Name, Prefix: a.Next.ToolNamePrefix, Fingerprint: a.Fingerprint, HeaderKey: a.HeaderKey, Up: up, Config: a.Next, Resolver: res,
		Base: ref, Metrics: ex.s.metrics.forServer(a.Name), PerUser: perUser(a.Next), Detect: ex.s.accounts.on() && detectable(a.Next), Pins: ex.s.pins.g}
	ex.rt.Add(b)
	ex.started = append(ex.started, b)
}

// swap makes the new runtime the running one: it counts its references,
// starts the new upstreams and waits (bounded) for their first discovery,
// so that a changed server's tools do not vanish from the catalog while it
// reconnects; then it publishes the runtime with its catalog and retires
// the old one.
func (ex *execution) swap() {
	s, old, rt := ex.s, ex.old, ex.rt
	s.refs.hold(rt)
	for _, b := range ex.started {
		b.Up.Start()
	}
	first := !s.applied.Load()
	if !first {
		s.awaitDiscovery(ex.started)
	}
	for _, b := range ex.resolverChanged {
		b.Base.Set(b.Resolver)
	}
	next := callpath.BuildCatalog(rt.Backends, rt.Policy, &s.accounts, s.log)
	catalog.LogWarnings(old.Catalog.Load(), next, s.log)
	rt.Catalog.Store(next)
	rt.Processors = callpath.NewProcessors(rt, old.Processors, s.processors)
	s.limits.SetRules(rt.Config.Limits)
	s.rt.Store(rt)
	if first {
		s.applied.Store(true)
		if len(ex.started) == 0 {
			s.ready.Store(true)
		} else {
			s.bg.Go(func() { s.becomeReady(ex.started) })
		}
	}
	s.durable.start()
	ex.forgetRemoved()
	s.refs.retire(old)
	old.Processors.Retire(rt.Processors)
	s.refreshCatalog(old)
}

// forgetRemoved drops the metrics of the servers the old runtime had and the
// new one has not.
func (ex *execution) forgetRemoved() {
	for name := range ex.old.ByName {
		if ex.rt.ByName[name] == nil {
			ex.s.metrics.forget(name)
		}
	}
}

// runtimeRefs counts the runtimes holding each upstream, headers resolver
// and AuthZEN client (runtimes built by reloads share the ones whose
// settings did not change), and closes each when the last runtime holding
// it is released.
type runtimeRefs struct {
	mu       sync.Mutex
	refs     map[any]int // *upstream.Upstream, *headers.Resolver and *authzen.Client → runtimes holding it
	retiring sync.WaitGroup
	ctx      context.Context // cancelled by stop: retired runtimes close at once
	stop     context.CancelFunc
	drain    time.Duration // Options.DrainTimeout
	log      hclog.Logger
}

// newRuntimeRefs returns an empty count; retired runtimes wait at most
// drain for their calls.
func newRuntimeRefs(drain time.Duration, log hclog.Logger) *runtimeRefs {
	r := &runtimeRefs{refs: map[any]int{}, drain: drain, log: log}
	r.ctx, r.stop = context.WithCancel(context.Background())
	return r
}

// hold counts rt's references to its upstreams, resolvers and AuthZEN
// client. Requires applyMu.
func (s *runtimeRefs) hold(rt *callpath.Runtime) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rt.Authz != nil && rt.Authz.AuthZEN != nil {
		s.refs[rt.Authz.AuthZEN]++
	}
	for _, b := range rt.Backends {
		s.refs[b.Up]++
		if b.Resolver != nil {
			s.refs[b.Resolver]++
		}
	}
}

// release drops rt's references and closes what nothing holds any more,
// waiting for the closes.
func (s *runtimeRefs) release(rt *callpath.Runtime) {
	var wg sync.WaitGroup
	s.mu.Lock()
	if a := rt.Authz; a != nil && a.AuthZEN != nil {
		if s.refs[a.AuthZEN]--; s.refs[a.AuthZEN] == 0 {
			delete(s.refs, a.AuthZEN)
			a.AuthZEN.Close()
		}
	}
	for _, b := range rt.Backends {
		if s.refs[b.Up]--; s.refs[b.Up] == 0 {
			delete(s.refs, b.Up)
			wg.Go(func() { _ = b.Up.Close() })
		}
		if b.Resolver != nil {
			if s.refs[b.Resolver]--; s.refs[b.Resolver] == 0 {
				delete(s.refs, b.Resolver)
				b.Resolver.Close()
			}
		}
	}
	s.mu.Unlock()
	wg.Wait()
}

// retire marks old as replaced and, in a goroutine close waits for,
// releases it once the calls that started on it have finished.
func (s *runtimeRefs) retire(old *callpath.Runtime) {
	idle := old.Retire()
	timeout := s.drain
	if timeout <= 0 {
		timeout = defaultDrainTimeout
	}
	s.retiring.Go(func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-idle:
		case <-t.C:
			s.log.Warn("reload: closing replaced upstreams with calls still in flight", "after", timeout)
		case <-s.ctx.Done():
		}
		s.release(old)
	})
}

// close releases the retired runtimes at once, waits for them, then
// releases rt.
func (s *runtimeRefs) close(rt *callpath.Runtime) {
	s.stop()
	s.retiring.Wait()
	s.release(rt)
}

// awaitDiscovery waits, at most Options.SwapWait, for the first discovery
// attempt of each started backend. The first Apply does not wait (it has
// no running servers to keep serving meanwhile: serve listens at once and
// each server's tools appear when its discovery ends, with list_changed);
// readiness waits instead (becomeReady).
func (s *Server) awaitDiscovery(started []*callpath.Backend) {
	wait := s.opts.SwapWait
	if wait == 0 {
		wait = defaultSwapWait
	}
	if len(started) == 0 || wait < 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for _, b := range started {
		select {
		case <-b.Up.Discovered():
		case <-t.C:
			return
		case <-s.life.Done():
			return
		}
	}
}

// becomeReady turns readiness on after the first Apply once its servers'
// first discovery attempts ended, or Options.SwapWait passed: a replica
// that load balancers send traffic to knows its tools (a hung server
// does not hold it back for longer).
func (s *Server) becomeReady(started []*callpath.Backend) {
	s.awaitDiscovery(started)
	s.ready.Store(true)
}

// upstreamOptions returns sc's upstream options (reload.UpstreamOptions)
// with the server's logger, supervisor, retry bounds and hooks; the
// upstream's own requests take their headers from ref.
func (s *Server) upstreamOptions(sc *config.Server, ref *callpath.ResolverRef) upstream.Options {
	o := reload.UpstreamOptions(sc)
	o.Supervisor, o.RetryMin, o.RetryMax = s.opts.StdioSupervisor, s.opts.RetryMin, s.opts.RetryMax
	o.Telemetry = s.tel
	o.Logger = s.log.Named("upstream").With("server", sc.Name)
	o.OnChange = func() { s.refreshCatalog(nil) }
	o.OnDiscovery = s.metrics.observeDiscovery(sc.Name)
	o.Handler = guardedHandler{s.panics, &s.fwd}
	o.Via = s.via
	o.RoundTripper = s.opts.UpstreamTransport
	// Discovery uses the newest credentials built for this upstream; a
	// per-user server's, a connected user's token.
	o.BaseHeaders = ref.BaseHeaders
	o.OnUnauthorized = ref.Unauthorized
	if perUser(sc) || s.accounts.on() && detectable(sc) {
		o.BaseHeaders = s.accounts.headers(sc.Name, ref.BaseHeaders)
		o.OnUnauthorized = s.accounts.unauthorized(s.life, sc.Name, ref.Unauthorized)
	}
	if s.accounts.on() && detectable(sc) {
		o.OnRefused = func(se *upstream.StatusError) {
			if callpath.BearerChallenge(se) && !s.accounts.Detected(sc.Name) {
				s.accounts.Detect(sc.Name)
				s.refreshCatalog(nil) // connect_account names it now
			}
		}
	}
	return o
}

// perUser reports whether each caller connects their own account on sc.
func perUser(sc *config.Server) bool { return sc.Type != config.TypeStdio && sc.OAuth.PerUser() }

// refreshCatalog rebuilds the current runtime's catalog from its backends'
// tool lists and tells each session whose visible lists changed. prev, when
// non-nil, is the runtime clients saw before (across a swap).
func (s *Server) refreshCatalog(prev *callpath.Runtime) {
	s.catMu.Lock()
	rt := s.rt.Load()
	before := rt.Catalog.Load()
	if prev != nil {
		before = prev.Catalog.Load()
	}
	next := callpath.BuildCatalog(rt.Backends, rt.Policy, &s.accounts, s.log)
	catalog.LogWarnings(rt.Catalog.Load(), next, s.log)
	rt.Catalog.Store(next)
	s.catMu.Unlock()
	s.notifyChanges(before, next)
}

// notifyChanges sends each session the list_changed notifications for what
// differs between the catalogs it saw (before) and sees now (next).
func (s *Server) notifyChanges(before, next *callpath.Catalog) {
	tools, prompts, resources := !catalog.SameTools(before, next), !catalog.SamePrompts(before, next), !catalog.SameResources(before, next)
	if !tools && !prompts && !resources {
		return
	}
	s.modern.ListsChanged(tools, prompts, resources)
	searching := before.Searching() || next.Searching()
	// Every replica sees the change: a session hears of it from its holder.
	for _, st := range s.sessions.Held() {
		if tools && (!searching || sessionToolsChanged(st, before, next)) {
			s.sessions.Notify(st, "notifications/tools/list_changed", emptyParams)
		}
		if prompts {
			s.sessions.Notify(st, "notifications/prompts/list_changed", emptyParams)
		}
		if resources {
			s.sessions.Notify(st, "notifications/resources/list_changed", emptyParams)
		}
	}
}

// emptyParams are the params of a notification that has none.
var emptyParams = json.RawMessage(`{}`)

// sessionToolsChanged reports whether the tools/list one session sees
// differs between two catalogs (with tool_search, sessions see different
// lists: what they promoted).
func sessionToolsChanged(st *callpath.Session, before, next *callpath.Catalog) bool {
	return string(st.Promo.ListFor(callpath.ViewOf(before, st.Profile))) != string(st.Promo.ToolsList(callpath.ViewOf(next, st.Profile)))
}

// newAuthenticator builds caller identification from inbound.auth.
func (s *Server) newAuthenticator(cfg *config.Config) (*inbound.Authenticator, error) {
	o := reload.InboundOptions(&cfg.Inbound)
	o.Logger = s.log.Named("inbound")
	return inbound.New(o)
}
