package proxy

// Connected accounts (DESIGN §2.9): the engine (package accounts) is made
// at the first Apply whose config sets inbound.public_url, over the store
// Options.AccountStore opened, and serves the call pipeline's accounts
// stage (through accountsPort), the /oauth/ routes, the upstreams'
// discovery of per-user servers and the status page.

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/accounts"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// errNoAccounts answers a connected-account call when the engine is not
// set up (no inbound.public_url at startup, or no store).
var errNoAccounts = errors.New("connected accounts are not set up on this mcp-mux: inbound.public_url must be set when it starts")

// accountsPort is the engine as callpath.Accounts, set once made.
type accountsPort struct {
	m atomic.Pointer[accounts.Manager]
}

var _ callpath.Accounts = (*accountsPort)(nil)

func (p *accountsPort) manager() (*accounts.Manager, error) {
	if m := p.m.Load(); m != nil {
		return m, nil
	}
	return nil, errNoAccounts
}

// Token returns user's token for server; ok false when they have none.
func (p *accountsPort) Token(ctx context.Context, user, server string) (secret.Value, bool, error) {
	m, err := p.manager()
	if err != nil {
		return "", false, err
	}
	tok, err := m.Token(ctx, user, server)
	if errors.Is(err, accounts.ErrNotConnected) {
		return "", false, nil
	}
	return tok, err == nil, err
}

// Rejected passes the upstream's refusal to the engine.
func (p *accountsPort) Rejected(ctx context.Context, user, server string, sent secret.Value, refusal *upstream.StatusError) (callpath.Renewal, error) {
	m, err := p.manager()
	if err != nil {
		return callpath.Renewal{}, err
	}
	r, err := m.Rejected(ctx, user, server, sent, refusal.Code, refusal.Challenges)
	if errors.Is(err, accounts.ErrNotConnected) {
		return callpath.Renewal{}, nil // ask for consent
	}
	return callpath.Renewal{Again: r.Again, StepUp: r.StepUp}, err
}

// Start begins a consent.
func (p *accountsPort) Start(ctx context.Context, user, server string, refusal *upstream.StatusError, stepUp []string) (*callpath.Consent, error) {
	m, err := p.manager()
	if err != nil {
		return nil, err
	}
	req := accounts.StartRequest{User: user, Server: server, StepUp: stepUp}
	if refusal != nil {
		req.WWWAuthenticate = refusal.Challenges
	}
	c, err := m.Start(ctx, req)
	if err != nil {
		return nil, err
	}
	return &callpath.Consent{ID: c.ID, URL: c.URL, Expires: c.Expires}, nil
}

// Wait waits for consent id. (An id is unguessable and reaches only its
// user, in their own elicitation and sealed requestState.)
func (p *accountsPort) Wait(ctx context.Context, _, id string) error {
	m, err := p.manager()
	if err != nil {
		return err
	}
	return m.Wait(ctx, id)
}

// Result reports whether consent id completed.
func (p *accountsPort) Result(ctx context.Context, _, id string) (bool, error) {
	m, err := p.manager()
	if err != nil {
		return false, err
	}
	return m.Result(ctx, id)
}

// Disconnect forgets user's tokens for server.
func (p *accountsPort) Disconnect(ctx context.Context, user, server string) (bool, error) {
	m, err := p.manager()
	if err != nil {
		return false, err
	}
	return m.Disconnect(ctx, user, server)
}

// setUpAccounts makes the engine at the first config with
// inbound.public_url (and a store), and gives it cfg's per-user servers.
// A later change of public_url needs a restart: it is logged.
func (s *Server) setUpAccounts(cfg *config.Config) {
	m := s.accounts.m.Load()
	switch {
	case m == nil && cfg.Inbound.PublicURL == "":
		return
	case m == nil && s.opts.AccountStore == nil:
		s.log.Warn("connected accounts: inbound.public_url is set but no account store was opened; restart mcp-mux to use them")
		return
	case m == nil:
		made, err := accounts.New(accounts.Options{PublicURL: cfg.Inbound.PublicURL, Sealer: s.states, Store: s.opts.AccountStore,
			Replica: s.replica, Logger: s.log.Named("accounts"), HTTPClient: s.opts.AccountHTTPClient})
		if err != nil {
			s.log.Error("connected accounts are off", "err", err)
			return
		}
		s.accounts.m.Store(made)
		s.publicURL = cfg.Inbound.PublicURL
		m = made
	case cfg.Inbound.PublicURL != s.publicURL:
		s.log.Warn("connected accounts: inbound.public_url changed; the new URL applies after a restart", "running", s.publicURL)
	}
	m.Configure(accountServers(cfg))
}

// accountServers are cfg's per-user servers as the engine takes them.
func accountServers(cfg *config.Config) []accounts.ServerConfig {
	var out []accounts.ServerConfig
	for _, name := range callpath.AccountServers(cfg) {
		sc := cfg.Server(name)
		a := sc.OAuth
		out = append(out, accounts.ServerConfig{Name: sc.Name, URL: sc.URL, ClientID: a.ClientID, ClientSecret: a.ClientSecret,
			ClientMetadataURL: a.ClientMetadataURL, Scope: a.Scope, AuthorizationURL: a.AuthorizationURL, TokenURL: a.TokenURL})
	}
	return out
}

// accountHeaders returns the headers a per-user server's own requests
// (discovery) go out with: base's, with the token of a user who
// connected, when any did.
func (s *Server) accountHeaders(name string, base func(context.Context) (http.Header, error)) func(context.Context) (http.Header, error) {
	return func(ctx context.Context) (http.Header, error) {
		h, err := base(ctx)
		m := s.accounts.m.Load()
		if err != nil || m == nil {
			return h, err
		}
		tok, terr := m.AnyToken(ctx, name)
		if terr != nil {
			return h, nil // nobody connected yet: the server refuses, and waits for one
		}
		h = h.Clone()
		if h == nil {
			h = http.Header{}
		}
		h.Set("Authorization", "Bearer "+tok.Reveal())
		return h, nil
	}
}

// accountUnauthorized tells the engine, after base, that a per-user
// server refused the connected user's token its own request carried
// (sent): that token is refreshed or dropped, so the user is asked to
// connect again instead of discovery retrying it for ever.
func (s *Server) accountUnauthorized(name string, base func(http.Header)) func(http.Header) {
	return func(sent http.Header) {
		base(sent)
		m := s.accounts.m.Load()
		tok, ok := strings.CutPrefix(sent.Get("Authorization"), "Bearer ")
		if m == nil || !ok || tok == "" {
			return
		}
		ctx, cancel := context.WithTimeout(s.life, 30*time.Second)
		defer cancel()
		if err := m.AnyRejected(ctx, name, secret.Value(tok)); err != nil {
			s.log.Warn("connected accounts: the server refused a connected token; it stays", "server", name, "err", err)
		}
	}
}

// serveAccounts serves /oauth/callback and /oauth/client-metadata.json
// (no caller: the browser comes back from the authorization server).
func (s *Server) serveAccounts(w http.ResponseWriter, r *http.Request) {
	m := s.accounts.m.Load()
	if m == nil {
		http.NotFound(w, r)
		return
	}
	m.Handler().ServeHTTP(w, r)
}
