package proxy

// Apply: how a config change reaches the running server.
//
// A new runtime is built beside the running one and swapped in with one
// atomic store. Per server, Apply does the least it can:
//
//   - connection settings unchanged (config.Server.Fingerprint): the new
//     runtime shares the running upstream, its sessions and stdio processes;
//     when the header inputs (headers, oauth, user_auth, headers_from_context)
//     are unchanged too, it shares the header resolver and so keeps its OAuth
//     token. Presentation-only changes (description, routing, tools,
//     guardrails, tool_search) therefore never touch an upstream;
//   - changed: a new upstream is started (it discovers in the background);
//   - added: likewise; removed: nothing in the new runtime refers to it;
//   - invalid in the new file but running: the running one is kept (last
//     good settings) and the problem is reported;
//   - refused by Options.ServerChange: the running one is kept, with the
//     reason reported.
//
// Upstreams and resolvers are reference-counted by the runtimes that hold
// them. A replaced runtime is retired: once the calls that started on it have
// finished (bounded by Options.DrainTimeout, and cut short by Close), it drops
// its references, and whatever no runtime holds any more is closed (stdio
// process groups killed). Close waits for those closes.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/headers"
	"github.com/mcp-mux/mcp-mux/inbound"
	"github.com/mcp-mux/mcp-mux/interceptor"
	"github.com/mcp-mux/mcp-mux/seal"
	"github.com/mcp-mux/mcp-mux/upstream"
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
	cfg := s.rt.Load().cfg
	s.applyMu.Unlock()
	_, _ = s.apply(cfg, true) // the running config's inbound settings already built once
}

// apply builds and swaps in the runtime for cfg and returns the per-server
// problems (servers kept at their running settings). fresh makes every
// server get a new upstream.
func (s *Server) apply(cfg *config.Config, fresh bool) ([]config.Problem, error) {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	if s.closed.Load() {
		return nil, fmt.Errorf("server is closed")
	}
	old := s.rt.Load()
	auth, err := s.newAuthenticator(cfg)
	if err != nil {
		return nil, fmt.Errorf("inbound.auth: %w", err)
	}
	origins, err := newOriginPolicy(cfg.Inbound.AllowedHosts, cfg.Inbound.AllowedOrigins)
	if err != nil {
		return nil, err
	}
	icepts, ipro := interceptor.Build(cfg.Interceptors, interceptor.Options{Logger: s.log})
	for _, p := range ipro {
		s.log.Warn("skipping interceptor", "reason", p)
	}
	rt := newRuntime(cfg)
	rt.pol, rt.auth, rt.icepts, rt.origins = newCatalogPolicy(cfg, s.tasks != nil), auth, icepts, origins
	s.warnTaskSettings(old.cfg, cfg)
	rt.states = s.states
	if k := cfg.Inbound.RequestStateKey; !k.IsZero() {
		rt.states = seal.New(k.Reveal())
	}

	var problems []config.Problem
	var started, resolverChanged []*backend
	keep := func(prev *backend) {
		b := *prev
		b.metrics = s.metrics.forServer(b.name)
		rt.add(&b)
	}
	// A running server that is invalid in the new file keeps its last good settings.
	invalid := make(map[string]bool, len(cfg.Invalid))
	for _, se := range cfg.Invalid {
		invalid[se.Name] = true
	}
	inNew := make(map[string]bool, len(cfg.Servers))
	for _, sc := range cfg.Servers {
		inNew[sc.Name] = true
	}
	for _, prev := range old.backends {
		if invalid[prev.name] && !inNew[prev.name] {
			problems = append(problems, config.Problem{Server: prev.name, Message: "the new settings are invalid; kept the running ones"})
			keep(prev)
		}
	}
	for _, sc := range cfg.Servers {
		prev := old.byName[sc.Name]
		if !sc.Enabled {
			if prev != nil {
				if p, refused := s.refuse(prev, nil); refused {
					problems = append(problems, p)
					keep(prev)
				}
			}
			continue
		}
		fp := sc.Fingerprint()
		if prev != nil && (fresh || prev.fingerprint != fp) {
			if p, refused := s.refuse(prev, sc); refused {
				problems = append(problems, p)
				keep(prev)
				continue
			}
		}
		ro, hk := s.resolverOptions(sc)
		var res *headers.Resolver
		if prev != nil && prev.headerKey == hk && prev.fingerprint == fp {
			res = prev.resolver // keeps the OAuth token and any fetch in flight
		} else if ro != nil {
			if res, err = headers.New(*ro); err != nil {
				s.log.Warn("skipping upstream server", "server", sc.Name, "reason", err)
				rt.skipped[sc.Name] = err.Error()
				if prev != nil {
					problems = append(problems, config.Problem{Server: sc.Name, Message: err.Error() + "; kept the running settings"})
					keep(prev)
				}
				continue
			}
		}
		if prev != nil && !fresh && prev.fingerprint == fp {
			b := *prev
			b.prefix, b.srv, b.resolver, b.headerKey = sc.ToolNamePrefix, sc, res, hk
			b.metrics = s.metrics.forServer(sc.Name)
			rt.add(&b)
			if res != prev.resolver {
				resolverChanged = append(resolverChanged, &b)
			}
			continue
		}
		ref := &resolverRef{}
		ref.p.Store(res)
		up, err := upstream.New(s.upstreamOptions(sc, ref))
		if err != nil {
			if res != nil && (prev == nil || res != prev.resolver) {
				res.Close()
			}
			s.log.Warn("skipping upstream server", "server", sc.Name, "reason", err)
			rt.skipped[sc.Name] = err.Error()
			continue
		}
		b := &backend{name: sc.Name, prefix: sc.ToolNamePrefix, fingerprint: fp, headerKey: hk, up: up, srv: sc, resolver: res,
			base: ref, metrics: s.metrics.forServer(sc.Name)}
		rt.add(b)
		started = append(started, b)
	}
	for _, prev := range old.backends {
		if inNew[prev.name] || invalid[prev.name] {
			continue
		}
		if p, refused := s.refuse(prev, nil); refused {
			problems = append(problems, p)
			keep(prev)
		}
	}
	s.hold(rt)
	// New upstreams discover before the swap (bounded), so that a changed
	// server's tools do not vanish from the catalog while it reconnects.
	for _, b := range started {
		b.up.Start()
	}
	s.awaitDiscovery(started)
	for _, b := range resolverChanged {
		b.base.p.Store(b.resolver)
	}
	rt.cat.Store(buildCatalog(rt.backends, rt.pol, s.log))
	s.rt.Store(rt)
	s.ready.Store(true)
	s.startTasks()
	for name := range old.byName {
		if rt.byName[name] == nil {
			s.metrics.forget(name)
		}
	}
	s.retire(old)
	s.refreshCatalog(old)
	return problems, nil
}

// refuse asks Options.ServerChange whether the running backend prev may be
// replaced by next (nil: removed or disabled).
func (s *Server) refuse(prev *backend, next *config.Server) (config.Problem, bool) {
	if err := s.taskChange(prev.srv, next); err != nil {
		return config.Problem{Server: prev.name, Message: err.Error()}, true
	}
	if s.opts.ServerChange == nil {
		return config.Problem{}, false
	}
	if err := s.opts.ServerChange(prev.srv, next); err != nil {
		return config.Problem{Server: prev.name, Message: err.Error()}, true
	}
	return config.Problem{}, false
}

// newRuntime returns an empty runtime for cfg.
func newRuntime(cfg *config.Config) *runtime {
	return &runtime{cfg: cfg, byName: make(map[string]*backend), skipped: make(map[string]string), idle: make(chan struct{})}
}

func (rt *runtime) add(b *backend) {
	rt.backends = append(rt.backends, b)
	rt.byName[b.name] = b
}

// enter registers a call on rt; false when rt was retired meanwhile.
func (rt *runtime) enter() bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.retired {
		return false
	}
	rt.calls++
	return true
}

func (rt *runtime) leave() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.calls--
	if rt.calls == 0 && rt.retired {
		close(rt.idle)
	}
}

// enterRuntime returns the current runtime with a call registered on it;
// the caller must call leave on it when the call has finished.
func (s *Server) enterRuntime() *runtime {
	for {
		if rt := s.rt.Load(); rt.enter() {
			return rt
		}
	}
}

// hold counts rt's references to its upstreams and resolvers.
// Requires applyMu.
func (s *Server) hold(rt *runtime) {
	s.refMu.Lock()
	defer s.refMu.Unlock()
	for _, b := range rt.backends {
		s.refs[b.up]++
		if b.resolver != nil {
			s.refs[b.resolver]++
		}
	}
}

// release drops rt's references and closes what nothing holds any more,
// waiting for the closes.
func (s *Server) release(rt *runtime) {
	var wg sync.WaitGroup
	s.refMu.Lock()
	for _, b := range rt.backends {
		if s.refs[b.up]--; s.refs[b.up] == 0 {
			delete(s.refs, b.up)
			wg.Go(func() { _ = b.up.Close() })
		}
		if b.resolver != nil {
			if s.refs[b.resolver]--; s.refs[b.resolver] == 0 {
				delete(s.refs, b.resolver)
				b.resolver.Close()
			}
		}
	}
	s.refMu.Unlock()
	wg.Wait()
}

// retire marks old as replaced and, in a goroutine Close waits for, releases
// it once the calls that started on it have finished.
func (s *Server) retire(old *runtime) {
	old.mu.Lock()
	old.retired = true
	if old.calls == 0 {
		close(old.idle)
	}
	old.mu.Unlock()
	timeout := s.opts.DrainTimeout
	if timeout <= 0 {
		timeout = defaultDrainTimeout
	}
	s.retiring.Go(func() {
		t := time.NewTimer(timeout)
		defer t.Stop()
		select {
		case <-old.idle:
		case <-t.C:
			s.log.Warn("reload: closing replaced upstreams with calls still in flight", "after", timeout)
		case <-s.retireCtx.Done():
		}
		s.release(old)
	})
}

// resolverRef is the resolver an upstream's own requests (discovery,
// control sessions) take their headers from; it is shared by the runtimes
// that share the upstream, and follows the newest one.
type resolverRef struct {
	p atomic.Pointer[headers.Resolver]
}

// awaitDiscovery waits, at most Options.SwapWait, for the first discovery
// attempt of each started backend.
func (s *Server) awaitDiscovery(started []*backend) {
	if len(started) == 0 {
		return
	}
	wait := s.opts.SwapWait
	if wait == 0 {
		wait = defaultSwapWait
	}
	if wait < 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for _, b := range started {
		select {
		case <-b.up.Discovered():
		case <-t.C:
			return
		}
	}
}

func (s *Server) upstreamOptions(sc *config.Server, ref *resolverRef) upstream.Options {
	o := upstream.Options{
		Name:            sc.Name,
		Transport:       sc.Type,
		Command:         sc.Command,
		Args:            sc.Args,
		URL:             sc.URL,
		InitTimeout:     sc.SessionInitTimeout,
		CallTimeout:     sc.ToolCallTimeout,
		Supervisor:      s.opts.StdioSupervisor,
		Scope:           sc.SessionScope,
		ProtocolVersion: eraOf(sc.ProtocolVersion),
		MaxSessions:     sc.MaxSessions,
		IdleTimeout:     sc.IdleTimeout,
		RetryMin:        s.opts.RetryMin,
		RetryMax:        s.opts.RetryMax,
		Logger:          s.log.Named("upstream").With("server", sc.Name),
		OnChange:        func() { s.refreshCatalog(nil) },
		OnDiscovery:     s.metrics.observeDiscovery(sc.Name),
		Handler:         guardedHandler{s.panics, (*forwarder)(s)},
		Via:             s.via,
		// Discovery uses the newest credentials built for this upstream.
		BaseHeaders: func(ctx context.Context) (http.Header, error) {
			if r := ref.p.Load(); r != nil {
				return r.Base(ctx)
			}
			return nil, nil
		},
		OnUnauthorized: func(sent http.Header) {
			if r := ref.p.Load(); r != nil {
				r.UnauthorizedHeader(sent)
			}
		},
	}
	if len(sc.Env) > 0 {
		o.Env = make(map[string]string, len(sc.Env))
		for k, v := range sc.Env {
			o.Env[k] = v.Reveal()
		}
	}
	if len(sc.Headers) > 0 {
		o.Header = make(http.Header, len(sc.Headers))
		for k, v := range sc.Headers {
			o.Header[k] = []string{v.Reveal()}
		}
	}
	return o
}

// headerKey identifies a resolver's inputs (it hashes secrets: compare it,
// never log it).
func headerKey(o *headers.Options) string {
	if o == nil {
		return ""
	}
	c := *o
	c.Logger, c.HTTPClient = nil, nil
	data, _ := json.Marshal(c) // strings, maps and pointers to them: cannot fail
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// refreshCatalog rebuilds the current runtime's catalog from its backends'
// tool lists and tells each session whose visible lists changed. prev, when
// non-nil, is the runtime clients saw before (across a swap).
func (s *Server) refreshCatalog(prev *runtime) {
	s.catMu.Lock()
	rt := s.rt.Load()
	before := rt.cat.Load()
	if prev != nil {
		before = prev.cat.Load()
	}
	next := buildCatalog(rt.backends, rt.pol, s.log)
	rt.cat.Store(next)
	s.catMu.Unlock()
	s.notifyChanges(before, next)
}

// notifyChanges sends each session the list_changed notifications for what
// differs between the catalogs it saw (before) and sees now (next).
func (s *Server) notifyChanges(before, next *catalog) {
	tools, prompts, resources := !sameTools(before, next), !samePrompts(before, next), !sameResources(before, next)
	if !tools && !prompts && !resources {
		return
	}
	s.listeners.changed(s, tools, prompts, resources)
	searching := before.search != nil || next.search != nil
	for _, ss := range s.sessions.all() {
		if tools && (!searching || s.sessionToolsChanged(ss, before, next)) {
			s.notify(context.Background(), ss, "notifications/tools/list_changed", nil)
		}
		if prompts {
			s.notify(context.Background(), ss, "notifications/prompts/list_changed", nil)
		}
		if resources {
			s.notify(context.Background(), ss, "notifications/resources/list_changed", nil)
		}
	}
}

// sessionToolsChanged reports whether the tools/list one session sees
// differs between two catalogs (with tool_search, sessions see different
// lists: what they promoted).
func (s *Server) sessionToolsChanged(ss *mcp.ServerSession, before, next *catalog) bool {
	st := s.sessions.get(ss)
	if st == nil {
		return true
	}
	return string(st.promo.listFor(before)) != string(s.toolsList(st, next))
}

// newAuthenticator builds caller identification from inbound.auth.
func (s *Server) newAuthenticator(cfg *config.Config) (*inbound.Authenticator, error) {
	a := cfg.Inbound.Auth
	keys := make(map[string]string, len(a.Keys))
	for u, k := range a.Keys {
		keys[u] = k.Reveal()
	}
	return inbound.New(inbound.Options{
		Mode: a.Mode, UserHeader: cfg.Inbound.UserHeader, Keys: keys,
		JWKSURL: a.JWKSURL, Issuer: a.Issuer, Audience: a.Audience, UserClaim: a.UserClaim,
		Logger: s.log.Named("inbound"),
	})
}

// eraOf maps protocol_version to the upstream's setting.
func eraOf(v string) string {
	if v == "auto" {
		return upstream.VersionAuto
	}
	return v
}
