package proxy

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/inbound"
	"github.com/mcp-mux/mcp-mux/interceptor"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// Apply makes cfg the running configuration. Backends whose connection
// settings are unchanged are kept with their sessions; new or changed ones
// start discovering in the background; removed ones are closed after the swap.
// Apply never fails because an upstream is down.
func (s *Server) Apply(cfg *config.Config) error {
	s.applyMu.Lock()
	defer s.applyMu.Unlock()
	old := s.rt.Load()
	auth, err := s.newAuthenticator(cfg)
	if err != nil {
		return fmt.Errorf("inbound.auth: %w", err)
	}
	origins, err := newOriginPolicy(cfg.Inbound.AllowedHosts, cfg.Inbound.AllowedOrigins)
	if err != nil {
		return err
	}
	icepts, problems := interceptor.Build(cfg.Interceptors, interceptor.Options{Logger: s.log})
	for _, p := range problems {
		s.log.Warn("skipping interceptor", "reason", p)
	}
	rt := &runtime{cfg: cfg, byName: make(map[string]*backend), pol: newCatalogPolicy(cfg), auth: auth, icepts: icepts, origins: origins}
	var started []*backend
	for _, sc := range cfg.Servers {
		if !sc.Enabled {
			continue
		}
		fp := sc.Fingerprint()
		res, err := s.newResolver(sc)
		if err != nil {
			s.log.Warn("skipping upstream server", "server", sc.Name, "reason", err)
			continue
		}
		if prev, ok := old.byName[sc.Name]; ok && prev.fingerprint == fp {
			b := *prev
			b.prefix, b.srv, b.resolver = sc.ToolNamePrefix, sc, res
			b.metrics = s.metrics.forServer(sc.Name)
			rt.backends = append(rt.backends, &b)
			rt.byName[sc.Name] = &b
			continue
		}
		up, err := upstream.New(s.upstreamOptions(sc))
		if err != nil {
			s.log.Warn("skipping upstream server", "server", sc.Name, "reason", err)
			continue
		}
		b := &backend{name: sc.Name, prefix: sc.ToolNamePrefix, fingerprint: fp, up: up, srv: sc, resolver: res,
			metrics: s.metrics.forServer(sc.Name)}
		rt.backends = append(rt.backends, b)
		rt.byName[sc.Name] = b
		started = append(started, b)
	}
	rt.cat.Store(buildCatalog(rt.backends, rt.pol, s.log))
	s.rt.Store(rt)
	s.ready.Store(true)
	for _, b := range started {
		b.up.Start()
	}
	// Close what the new runtime no longer uses.
	var wg sync.WaitGroup
	for name, b := range old.byName {
		if b.resolver != nil {
			b.resolver.Close()
		}
		if nb, ok := rt.byName[name]; ok && nb.up == b.up {
			continue
		}
		wg.Go(func() { _ = b.up.Close() })
	}
	go wg.Wait()
	s.refreshCatalog(old.cat.Load())
	return nil
}

func (s *Server) upstreamOptions(sc *config.Server) upstream.Options {
	o := upstream.Options{
		Name:        sc.Name,
		Transport:   sc.Type,
		Command:     sc.Command,
		Args:        sc.Args,
		URL:         sc.URL,
		InitTimeout: sc.SessionInitTimeout,
		CallTimeout: sc.ToolCallTimeout,
		Scope:       sc.SessionScope,
		MaxSessions: sc.MaxSessions,
		IdleTimeout: sc.IdleTimeout,
		RetryMin:    s.opts.RetryMin,
		RetryMax:    s.opts.RetryMax,
		Logger:      s.log.Named("upstream").With("server", sc.Name),
		OnChange:    func() { s.refreshCatalog(nil) },
		Handler:     (*forwarder)(s),
		// Discovery uses the current runtime's credentials for this server.
		BaseHeaders: func(ctx context.Context) (http.Header, error) {
			if b := s.rt.Load().byName[sc.Name]; b != nil && b.resolver != nil {
				return b.resolver.Base(ctx)
			}
			return nil, nil
		},
		OnUnauthorized: func(sent http.Header) {
			if b := s.rt.Load().byName[sc.Name]; b != nil && b.resolver != nil {
				b.resolver.UnauthorizedHeader(sent)
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

// refreshCatalog rebuilds the current runtime's catalog from its backends'
// tool lists and tells every session when the visible list changed. prev,
// when non-nil, is the catalog clients saw before (across a swap).
func (s *Server) refreshCatalog(prev *catalog) {
	s.catMu.Lock()
	rt := s.rt.Load()
	before := rt.cat.Load()
	if prev != nil {
		before = prev
	}
	next := buildCatalog(rt.backends, rt.pol, s.log)
	rt.cat.Store(next)
	s.catMu.Unlock()
	if !sameTools(before, next) {
		s.notifyAll("notifications/tools/list_changed")
	}
	if !samePrompts(before, next) {
		s.notifyAll("notifications/prompts/list_changed")
	}
	if !sameResources(before, next) {
		s.notifyAll("notifications/resources/list_changed")
	}
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
