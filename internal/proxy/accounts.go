package proxy

// Connected accounts (DESIGN §2.9): the engine (package accounts) is made
// at the first Apply whose config sets inbound.public_url, over the store
// Options.AccountStore opened, and serves — through accountsPort — the
// call pipeline's accounts stage, the /oauth/ routes, the upstreams'
// discovery of per-user servers, revocation and the status page.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-mux/mcp-mux/internal/accounts"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/status"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// errNoAccounts answers a connected-account call when the engine is not
// set up (no inbound.public_url at startup, or no store).
var errNoAccounts = errors.New("connected accounts are not set up on this mcp-mux: inbound.public_url must be set when it starts")

// accountsPort is the engine as callpath.Accounts, set once made, and
// what the Server asks of connected accounts.
type accountsPort struct {
	m        atomic.Pointer[accounts.Manager]
	log      hclog.Logger
	rt       *atomic.Pointer[callpath.Runtime] // the Server's running runtime
	detected sync.Map                          // server name → true: it asked for a Bearer token (Detect)

	// Set in New, read at the first Apply that makes the engine.
	store     accounts.Store
	hc        *http.Client
	publicURL string // the inbound.public_url the engine was made with
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

// Detected reports whether server asked for a Bearer token (Detect).
func (p *accountsPort) Detected(server string) bool {
	_, ok := p.detected.Load(server)
	return ok
}

// Detect notes that server, configured with no credentials, answered a
// call 401 with a Bearer challenge: its callers connect their accounts
// from now on (logged once).
func (p *accountsPort) Detect(server string) {
	if _, had := p.detected.LoadOrStore(server, true); !had {
		p.log.Info("connected accounts: the server asks for a Bearer token; each caller connects their own account on it", "server", server)
	}
}

// setUp makes the engine at the first config with inbound.public_url
// (and a store), sealing with states (the runtime's:
// inbound.request_state_key's when set, which every replica shares), and
// gives it cfg's per-user servers. A later change of public_url needs a
// restart: it is logged.
func (p *accountsPort) setUp(cfg *config.Config, states *seal.Sealer, replica string) {
	m := p.m.Load()
	switch {
	case m == nil && cfg.Inbound.PublicURL == "":
		return
	case m == nil && p.store == nil:
		p.log.Warn("connected accounts: inbound.public_url is set but no account store was opened; restart mcp-mux to use them")
		return
	case m == nil:
		made, err := accounts.New(accounts.Options{PublicURL: cfg.Inbound.PublicURL, Sealer: states, Store: p.store,
			Replica: replica, Logger: p.log, HTTPClient: p.hc})
		if err != nil {
			p.log.Error("connected accounts are off", "err", err)
			return
		}
		p.publicURL = cfg.Inbound.PublicURL
		p.m.Store(made)
		m = made
	case cfg.Inbound.PublicURL != p.publicURL:
		p.log.Warn("connected accounts: inbound.public_url changed; the new URL applies after a restart", "running", p.publicURL)
	}
	m.Configure(accountServers(cfg))
}

// on reports whether the engine runs.
func (p *accountsPort) on() bool { return p.m.Load() != nil }

// accountServers are cfg's servers as the engine takes them: the per-user
// ones, and those that may turn out to be (detectable).
func accountServers(cfg *config.Config) []accounts.ServerConfig {
	var out []accounts.ServerConfig
	for _, sc := range cfg.Servers {
		switch {
		case perUser(sc):
			a := sc.OAuth
			out = append(out, accounts.ServerConfig{Name: sc.Name, URL: sc.URL, ClientID: a.ClientID, ClientSecret: a.ClientSecret,
				ClientMetadataURL: a.ClientMetadataURL, Scope: a.Scope, AuthorizationURL: a.AuthorizationURL, TokenURL: a.TokenURL})
		case detectable(sc):
			out = append(out, accounts.ServerConfig{Name: sc.Name, URL: sc.URL, Detected: true})
		}
	}
	return out
}

// detectable reports whether sc may turn out to want each caller's
// account: an http or sse server configured with no credentials of its
// own (no oauth, user_auth or token_exchange block, no static
// Authorization header), when connected accounts are on.
func detectable(sc *config.Server) bool {
	if sc.Type == config.TypeStdio || sc.OAuth != nil || sc.UserAuth != nil || sc.TokenExchange != nil {
		return false
	}
	for k := range sc.Headers {
		if http.CanonicalHeaderKey(k) == "Authorization" {
			return false
		}
	}
	return true
}

// accountHeaders returns the headers a per-user server's own requests
// (discovery) go out with: base's, with the token of a user who
// connected, when any did.
func (p *accountsPort) headers(name string, base func(context.Context) (http.Header, error)) func(context.Context) (http.Header, error) {
	return func(ctx context.Context) (http.Header, error) {
		h, err := base(ctx)
		m := p.m.Load()
		if err != nil || m == nil {
			return h, err
		}
		tok, terr := m.AnyToken(ctx, name)
		if terr != nil {
			return h, nil // nobody connected yet: the server refuses, and waits for one
		}
		return callpath.WithBearer(h, tok), nil
	}
}

// unauthorized tells the engine, after base, that a per-user server
// refused the connected user's token its own request carried (sent): that
// token is refreshed or dropped, so the user is asked to connect again
// instead of discovery retrying it for ever. life ends with the Server.
func (p *accountsPort) unauthorized(life context.Context, name string, base func(http.Header)) func(http.Header) {
	return func(sent http.Header) {
		base(sent)
		m := p.m.Load()
		tok, ok := strings.CutPrefix(sent.Get("Authorization"), "Bearer ")
		if m == nil || !ok || tok == "" {
			return
		}
		ctx, cancel := context.WithTimeout(life, 30*time.Second)
		defer cancel()
		if err := m.AnyRejected(ctx, name, secret.Value(tok)); err != nil {
			p.log.Warn("connected accounts: the server refused a connected token; it stays", "server", name, "err", err)
		}
	}
}

// serveAccounts serves /oauth/callback and /oauth/client-metadata.json
// (no caller: the browser comes back from the authorization server).
func (p *accountsPort) serve(w http.ResponseWriter, r *http.Request) {
	m := p.m.Load()
	if m == nil {
		http.NotFound(w, r)
		return
	}
	m.Handler().ServeHTTP(w, r)
}

// accountStats returns the engine's numbers by server (nil when it does
// not run); counting connected users reads the store, bounded by
// statsTimeout.
func (p *accountsPort) stats() map[string]accounts.ServerStats {
	m := p.m.Load()
	if m == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	out := map[string]accounts.ServerStats{}
	for _, st := range m.Stats(ctx) {
		out[st.Name] = st
	}
	return out
}

// statsTimeout bounds the store reads of one accountStats.
const statsTimeout = 2 * time.Second

// accountsStatus is a server's connected-account numbers for the status
// page (never a token, never a user id).
func accountsStatus(st accounts.ServerStats) *status.Accounts {
	return &status.Accounts{Connected: st.Connected, ConsentsStarted: st.ConsentsStarted, ConsentsCompleted: st.ConsentsCompleted,
		ConsentsFailed: st.ConsentsFailed, Refreshes: st.Refreshes, Failures: st.Failures}
}

// awaitingReason is the reason of a per-user server whose discovery is
// refused: nobody connected an account yet.
const awaitingReason = "awaiting a connected account: its tools are discovered with the first account a user connects (connect_account)"

var (
	acctConnDesc    = prometheus.NewDesc("mcp_mux_account_users", "Users with a connected account on the server (from the store).", []string{"server"}, nil)
	acctConsentDesc = prometheus.NewDesc("mcp_mux_account_consents_total", "Connected-account consents on this replica, by server and outcome (started, completed, failed).", []string{"server", "outcome"}, nil)
	acctRefreshDesc = prometheus.NewDesc("mcp_mux_account_refreshes_total", "Connected-account token refreshes on this replica, by server.", []string{"server"}, nil)
	acctFailDesc    = prometheus.NewDesc("mcp_mux_account_failures_total", "Connected-account failures on this replica, by server and reason.", []string{"server", "reason"}, nil)
)

// accountsCollector exports the engine's numbers.
type accountsCollector struct{ s *Server }

func (c accountsCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{acctConnDesc, acctConsentDesc, acctRefreshDesc, acctFailDesc} {
		ch <- d
	}
}

func (c accountsCollector) Collect(ch chan<- prometheus.Metric) {
	for name, st := range c.s.accounts.stats() {
		ch <- prometheus.MustNewConstMetric(acctConnDesc, prometheus.GaugeValue, float64(st.Connected), name)
		ch <- prometheus.MustNewConstMetric(acctConsentDesc, prometheus.CounterValue, float64(st.ConsentsStarted), name, "started")
		ch <- prometheus.MustNewConstMetric(acctConsentDesc, prometheus.CounterValue, float64(st.ConsentsCompleted), name, "completed")
		ch <- prometheus.MustNewConstMetric(acctConsentDesc, prometheus.CounterValue, float64(st.ConsentsFailed), name, "failed")
		ch <- prometheus.MustNewConstMetric(acctRefreshDesc, prometheus.CounterValue, float64(st.Refreshes), name)
		for reason, n := range st.Failures {
			ch <- prometheus.MustNewConstMetric(acctFailDesc, prometheus.CounterValue, float64(n), name, reason)
		}
	}
}

// ErrNotAccountServer refuses a disconnect of a server where nobody
// connects an account.
var ErrNotAccountServer = errors.New("the server does not connect users' accounts")

// DisconnectAccount forgets user's connected account on server (the admin
// API's route) and reports whether there was one.
func (s *Server) DisconnectAccount(ctx context.Context, user, server string) (bool, error) {
	return s.accounts.disconnect(ctx, user, server)
}

// disconnect is Disconnect of a server of the running runtime that
// connects accounts (ErrNotAccountServer for any other).
func (p *accountsPort) disconnect(ctx context.Context, user, server string) (bool, error) {
	b := p.rt.Load().ByName[server]
	if b == nil || !b.ConnectsAccounts(p) {
		return false, ErrNotAccountServer
	}
	return p.Disconnect(ctx, user, server)
}

// serveDisconnect is DELETE /oauth/connections/{server}: the caller forgets
// their own connected account on a server (200 {"disconnected": bool}; 404
// for a server that connects none).
func (p *accountsPort) serveDisconnect(w http.ResponseWriter, r *http.Request) {
	caller := callpath.CallerFrom(r.Context())
	had, err := p.disconnect(r.Context(), caller.User, r.PathValue("server"))
	switch {
	case errors.Is(err, ErrNotAccountServer):
		http.Error(w, "no such connected-account server", http.StatusNotFound)
		return
	case err != nil:
		p.log.Warn("connected accounts: disconnect failed", "err", err)
		http.Error(w, "the disconnect failed; try again", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = fmt.Fprintf(w, `{"disconnected":%t}`+"\n", had)
}
