package accounts

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// StartRequest asks for a consent.
type StartRequest struct {
	User, Server string
	// WWWAuthenticate holds the upstream refusal's challenges; nil: probe
	// the server unauthenticated.
	WWWAuthenticate []string
	// StepUp are the scopes a 403 insufficient_scope asked for (Retry).
	StepUp []string
	// Session is opaque: where the call waits; kept in the pending record.
	Session string
}

// Consent is a started consent: the user opens URL.
type Consent struct {
	ID      string // random; also the elicitationId
	URL     string // the authorization URL to show the user
	Server  string
	Expires time.Time
}

// client is how the mux authenticates at a token endpoint.
type client struct {
	Kind   string           `json:"k"` // "pre", "cimd" or "dcr"
	ID     string           `json:"id"`
	Secret string           `json:"s,omitempty"`
	Style  oauth2.AuthStyle `json:"st"`
}

// pending is a pending consent's record, sealed in the store.
type pending struct {
	ID           string   `json:"id"`
	User         string   `json:"u"`
	Server       string   `json:"srv"`
	Issuer       string   `json:"iss"`
	IssSupported bool     `json:"isss,omitempty"`
	Client       client   `json:"c"`
	AuthURL      string   `json:"au"`
	TokenURL     string   `json:"tu"`
	Resource     string   `json:"res"`
	Scopes       []string `json:"sc,omitempty"`
	Verifier     string   `json:"v"`
	Session      string   `json:"ses,omitempty"`
	Replica      string   `json:"rep,omitempty"`
	Expires      int64    `json:"exp"`
}

// stateData is what a state token carries.
type stateData struct {
	ID string `json:"i"`
	UH string `json:"u"`
}

// Start begins a consent for r.User at r.Server and returns the URL to
// show the user. Past a bound it fails with ErrTooManyConsents before any
// request is made.
func (m *Manager) Start(ctx context.Context, r StartRequest) (*Consent, error) {
	sc, ok := m.server(r.Server)
	if !ok {
		return nil, fmt.Errorf("server '%s': %w", boundName(r.Server), ErrUnknownServer)
	}
	if err := checkStart(r); err != nil {
		return nil, fmt.Errorf("server '%s': %w", sc.Name, err)
	}
	id, uh := rand.Text(), m.userHash(r.User)
	expires := m.o.Now().Add(m.o.StateTTL)
	if err := m.store.reserve(ctx, uh, id, m.o.StateTTL, m.o.MaxPendingPerUser, m.o.MaxPending); err != nil {
		switch {
		case errors.Is(err, errTooManyUser):
			m.tally.fail(sc.Name, "too_many")
			return nil, fmt.Errorf("server '%s': %w: this user already has %d; finish one or let it expire (after %s) first",
				sc.Name, ErrTooManyConsents, m.o.MaxPendingPerUser, m.o.StateTTL)
		case errors.Is(err, errTooManyAll):
			m.tally.fail(sc.Name, "too_many")
			return nil, fmt.Errorf("server '%s': %w: the mux already has %d; try again later", sc.Name, ErrTooManyConsents, m.o.MaxPending)
		}
		return nil, fmt.Errorf("server '%s': %w", sc.Name, err)
	}
	c, err := m.begin(ctx, sc, r, id, uh, expires)
	if err != nil {
		if rerr := m.store.release(context.WithoutCancel(ctx), uh, id); rerr != nil {
			m.log.Warn("releasing a consent that did not start", "server", sc.Name, "err", rerr)
		}
		return nil, err
	}
	m.tally.add(sc.Name, func(c *counters) { c.started++ })
	return c, nil
}

// checkStart bounds a StartRequest's caller-chosen values.
func checkStart(r StartRequest) error {
	if err := checkUser(r.User); err != nil {
		return err
	}
	if len(r.Session) > maxSessionLen {
		return fmt.Errorf("a session reference has at most %d bytes", maxSessionLen)
	}
	if len(r.StepUp) > maxScopes || len(r.WWWAuthenticate) > maxChallenges {
		return fmt.Errorf("at most %d scopes and %d challenges", maxScopes, maxChallenges)
	}
	for _, s := range r.StepUp {
		if s == "" || len(s) > maxScopeLen || strings.ContainsAny(s, " \t\r\n\"") {
			return errors.New("a step-up scope is malformed")
		}
	}
	for _, h := range r.WWWAuthenticate {
		if len(h) > maxChallengeLen {
			return fmt.Errorf("a WWW-Authenticate header has at most %d bytes", maxChallengeLen)
		}
	}
	return nil
}

// begin discovers, registers, stores the pending record and builds the
// authorization URL of a reserved consent.
func (m *Manager) begin(ctx context.Context, sc ServerConfig, r StartRequest, id, uh string, expires time.Time) (*Consent, error) {
	d, err := m.discover(ctx, sc, r.WWWAuthenticate)
	if err != nil {
		m.tally.fail(sc.Name, "discovery")
		return nil, fmt.Errorf("server '%s': discovering its authorization server: %w", sc.Name, err)
	}
	cl, err := m.register(ctx, sc, d)
	if err != nil {
		m.tally.fail(sc.Name, "registration")
		return nil, fmt.Errorf("server '%s': %w", sc.Name, err)
	}
	scopes, err := m.scopes(ctx, sc, d, uh, r.StepUp)
	if err != nil {
		return nil, fmt.Errorf("server '%s': %w", sc.Name, err)
	}
	p := &pending{
		ID: id, User: r.User, Server: sc.Name, Issuer: d.issuer, IssSupported: d.issSupported,
		Client: cl, AuthURL: d.authURL, TokenURL: d.tokenURL, Resource: d.resource, Scopes: scopes,
		Verifier: oauth2.GenerateVerifier(), Session: r.Session, Replica: m.o.Replica, Expires: expires.UnixMilli(),
	}
	rec, err := sealJSON(m.vault, "pending\x00"+id, p)
	if err != nil {
		return nil, fmt.Errorf("server '%s': sealing the consent: %w", sc.Name, err)
	}
	if err := m.store.putPending(ctx, uh, id, rec, m.o.StateTTL); err != nil {
		return nil, fmt.Errorf("server '%s': %w", sc.Name, err)
	}
	if err := m.mark(ctx, id, expires); err != nil {
		return nil, fmt.Errorf("server '%s': %w", sc.Name, err)
	}
	st, _ := jsonBytes(stateData{ID: id, UH: uh})
	state := m.state.Seal("", st, m.o.StateTTL)
	authURL := oauthConfig(p, m.redirect).AuthCodeURL(state, oauth2.S256ChallengeOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource))
	m.remember(id, sc.Name, expires)
	return &Consent{ID: id, URL: authURL, Server: sc.Name, Expires: expires}, nil
}

// oauthConfig is the x/oauth2 configuration of a consent (or refresh).
func oauthConfig(p *pending, redirect string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     p.Client.ID,
		ClientSecret: p.Client.Secret,
		Endpoint:     oauth2.Endpoint{AuthURL: p.AuthURL, TokenURL: p.TokenURL, AuthStyle: p.Client.Style},
		RedirectURL:  redirect,
		Scopes:       p.Scopes,
	}
}

// scopes picks the scopes a consent asks for: on step-up the granted ones
// and the new; else the challenge's, the resource metadata's, the
// configured ones or none; offline_access when the server lists it.
func (m *Manager) scopes(ctx context.Context, sc ServerConfig, d *discovered, uh string, stepUp []string) ([]string, error) {
	var out []string
	switch {
	case len(stepUp) > 0:
		if e, err := m.entry(ctx, uh, sc.Name); err != nil {
			return nil, err
		} else if e != nil {
			out = append(out, e.Scopes...)
		}
		out = append(out, stepUp...)
	case d.challengeScope != "":
		out = strings.Fields(d.challengeScope)
	case len(d.scopesSupported) > 0:
		out = d.scopesSupported
	default:
		out = strings.Fields(sc.Scope)
	}
	if d.offlineAccess {
		out = append(out, "offline_access")
	}
	return union(out), nil
}

// union returns the distinct scopes of s in their first order.
func union(s ...[]string) []string {
	var out []string
	for _, l := range s {
		for _, v := range l {
			if v != "" && !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	if len(out) > maxScopes {
		out = out[:maxScopes]
	}
	return out
}

// boundName shortens a caller-given server name for a message.
func boundName(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// checkUser bounds a user id.
func checkUser(user string) error {
	if user == "" || len(user) > maxUserLen {
		return fmt.Errorf("a user id must have 1 to %d bytes", maxUserLen)
	}
	return nil
}
