package accounts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// entry is a vault entry: one user's tokens for one server, sealed in the
// store bound to (user hash, server).
type entry struct {
	Access    string   `json:"a"`
	Refresh   string   `json:"r,omitempty"`
	Expiry    int64    `json:"x,omitempty"` // unix ms; 0: unknown
	Scopes    []string `json:"sc,omitempty"`
	Asked     []string `json:"as,omitempty"` // what the last consent asked for
	Issuer    string   `json:"iss"`
	TokenURL  string   `json:"tu"`
	Resource  string   `json:"res"`
	Client    client   `json:"c"`
	ViaReject bool     `json:"vr,omitempty"` // refreshed because the upstream refused its predecessor
}

// newEntry makes the vault entry of a code exchange's token; msg says
// why it is unusable.
func newEntry(tok *oauth2.Token, p *pending) (*entry, string) {
	if t := tok.TokenType; t != "" && !strings.EqualFold(t, "bearer") {
		return nil, "the token is not a bearer token"
	}
	if len(tok.AccessToken) > maxTokenLen || len(tok.RefreshToken) > maxTokenLen {
		return nil, "the token response is too large to keep"
	}
	e := &entry{Access: tok.AccessToken, Refresh: tok.RefreshToken, Scopes: granted(tok, p.Scopes), Asked: p.Scopes,
		Issuer: p.Issuer, TokenURL: p.TokenURL, Resource: p.Resource, Client: p.Client}
	e.setExpiry(tok)
	return e, ""
}

// granted is the token's scope, else the requested ones.
func granted(tok *oauth2.Token, requested []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return union(strings.Fields(s))
	}
	return requested
}

// setExpiry records when tok expires.
func (e *entry) setExpiry(tok *oauth2.Token) {
	e.Expiry = 0
	if !tok.Expiry.IsZero() {
		e.Expiry = tok.Expiry.UnixMilli()
	}
}

// due reports whether e expires within before.
func (e *entry) due(now time.Time, before time.Duration) bool {
	return e.Expiry != 0 && now.Add(before).UnixMilli() >= e.Expiry
}

// binding is what a vault entry is sealed to.
func binding(uh, server string) string { return uh + "\x00" + server }

// save seals and stores a vault entry.
func (m *Manager) save(ctx context.Context, uh, server string, e *entry) error {
	b, err := sealJSON(m.vault, binding(uh, server), e)
	if err != nil {
		return err
	}
	if len(b) > MaxRecord {
		return errors.New("the vault entry is too large")
	}
	return m.store.putToken(ctx, uh, server, b)
}

// entry reads a vault entry (nil: none, or one that does not open here).
func (m *Manager) entry(ctx context.Context, uh, server string) (*entry, error) {
	b, err := m.store.getToken(ctx, uh, server)
	if err != nil || b == nil {
		return nil, err
	}
	var e entry
	if err := openJSON(m.vault, binding(uh, server), b, &e); err != nil {
		m.log.Warn("a vault entry does not open (another key, or copied); ignoring it", "server", server)
		return nil, nil
	}
	return &e, nil
}

// Token returns the user's access token for server, refreshed first when
// it expires within RefreshBefore: one refresh per (user, server) at a
// time, in this process and across replicas. ErrNotConnected: a consent
// is needed.
func (m *Manager) Token(ctx context.Context, user, server string) (secret.Value, error) {
	if err := checkUser(user); err != nil {
		return "", err
	}
	if _, ok := m.server(server); !ok {
		return "", fmt.Errorf("server '%s': %w", boundName(server), ErrUnknownServer)
	}
	return m.token(ctx, m.userHash(user), server)
}

// token is Token by user hash.
func (m *Manager) token(ctx context.Context, uh, server string) (secret.Value, error) {
	e, err := m.entry(ctx, uh, server)
	if err != nil {
		return "", fmt.Errorf("server '%s': %w", server, err)
	}
	if e == nil {
		return "", ErrNotConnected
	}
	if !e.due(m.o.Now(), m.o.RefreshBefore) {
		return secret.Value(e.Access), nil
	}
	return m.refreshShared(ctx, uh, server, e.Access, false)
}

// refreshShared runs one refresh of (uh, server) in this process for all
// who ask; sent is the access token the caller holds.
func (m *Manager) refreshShared(ctx context.Context, uh, server, sent string, viaReject bool) (secret.Value, error) {
	ch := m.sf.DoChan(binding(uh, server), func() (any, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*defaultTimeout)
		defer cancel()
		return m.refresh(ctx, uh, server, sent, viaReject)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return "", r.Err
		}
		return r.Val.(secret.Value), nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// refresh takes the store lock of (uh, server) and refreshes its token,
// unless another refreshed it meanwhile. invalid_grant drops the entry.
func (m *Manager) refresh(ctx context.Context, uh, server, sent string, viaReject bool) (secret.Value, error) {
	unlock, err := m.acquire(ctx, uh, server)
	if err != nil {
		return "", fmt.Errorf("server '%s': %w", server, err)
	}
	defer unlock()
	e, err := m.entry(ctx, uh, server)
	if err != nil {
		return "", fmt.Errorf("server '%s': %w", server, err)
	}
	if e == nil {
		return "", ErrNotConnected
	}
	if e.Access != sent && !e.due(m.o.Now(), m.o.RefreshBefore) {
		return secret.Value(e.Access), nil // another refreshed it
	}
	if e.Refresh == "" {
		return m.dropExpired(ctx, uh, server, e, viaReject)
	}
	m.tally.add(server, func(c *counters) { c.refreshes++ })
	tok, err := m.refreshConfig(server, e).Token(context.WithValue(ctx, oauth2.HTTPClient, m.direct))
	if err != nil {
		return m.refreshFailed(ctx, uh, server, e, viaReject, err)
	}
	if len(tok.AccessToken) > maxTokenLen || len(tok.RefreshToken) > maxTokenLen {
		return m.refreshFailed(ctx, uh, server, e, viaReject, errors.New("the token response is too large to keep"))
	}
	e.Access, e.ViaReject, e.Scopes = tok.AccessToken, viaReject, granted(tok, e.Scopes)
	if tok.RefreshToken != "" {
		e.Refresh = tok.RefreshToken // rotated
	}
	e.setExpiry(tok)
	if err := m.save(ctx, uh, server, e); err != nil {
		return "", fmt.Errorf("server '%s': storing the refreshed token: %w", server, err)
	}
	return secret.Value(e.Access), nil
}

// acquire takes the store's refresh lock of (uh, server), waiting up to
// lockTTL for another replica's refresh.
func (m *Manager) acquire(ctx context.Context, uh, server string) (func(), error) {
	deadline := time.Now().Add(lockTTL)
	for {
		unlock, ok, err := m.store.lock(ctx, uh, server, lockTTL)
		if err != nil || ok {
			return unlock, err
		}
		if time.Now().After(deadline) {
			return nil, errors.New("another replica's token refresh did not finish")
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// dropExpired handles a due token without a refresh token: still usable
// until it expires, unless the upstream refused it.
func (m *Manager) dropExpired(ctx context.Context, uh, server string, e *entry, viaReject bool) (secret.Value, error) {
	if !viaReject && m.o.Now().UnixMilli() < e.Expiry {
		return secret.Value(e.Access), nil
	}
	if _, err := m.store.deleteToken(ctx, uh, server); err != nil {
		return "", fmt.Errorf("server '%s': %w", server, err)
	}
	return "", ErrNotConnected
}

// refreshFailed drops the entry on invalid_grant (ErrNotConnected); on
// another failure a token that has not expired is still returned.
func (m *Manager) refreshFailed(ctx context.Context, uh, server string, e *entry, viaReject bool, err error) (secret.Value, error) {
	m.tally.fail(server, "refresh")
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode == "invalid_grant" {
		if _, derr := m.store.deleteToken(ctx, uh, server); derr != nil {
			return "", fmt.Errorf("server '%s': dropping a revoked grant: %w", server, derr)
		}
		return "", ErrNotConnected
	}
	msg := tokenFailure("the token refresh", err)
	if !viaReject && e.Expiry != 0 && m.o.Now().UnixMilli() < e.Expiry {
		m.log.Warn("refreshing a connected account's token failed; using it until it expires", "server", server, "reason", msg)
		return secret.Value(e.Access), nil
	}
	return "", fmt.Errorf("server '%s': %s", server, msg)
}

// refreshConfig is the refresh grant of e, carrying the resource (which
// oauth2.Config's refresh would not send). A pre-registered client uses
// the current configuration.
func (m *Manager) refreshConfig(server string, e *entry) *clientcredentials.Config {
	c := e.Client
	if sc, ok := m.server(server); ok && c.Kind == "pre" && sc.ClientID != "" {
		c.ID, c.Secret = sc.ClientID, sc.ClientSecret.Reveal()
	}
	params := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {e.Refresh}}
	if e.Resource != "" {
		params.Set("resource", e.Resource)
	}
	return &clientcredentials.Config{ClientID: c.ID, ClientSecret: c.Secret, TokenURL: e.TokenURL, AuthStyle: c.Style, EndpointParams: params}
}

// Rejected handles the upstream's 401 or 403 to the token sent: a 401
// refreshes once (Retry.Again), else drops the entry (ErrNotConnected); a
// 403 insufficient_scope asks for a step-up (Retry.StepUp) unless those
// scopes were already granted or asked for.
func (m *Manager) Rejected(ctx context.Context, user, server string, sent secret.Value, status int, wwwAuthenticate []string) (Retry, error) {
	if err := checkUser(user); err != nil {
		return Retry{}, err
	}
	if _, ok := m.server(server); !ok {
		return Retry{}, fmt.Errorf("server '%s': %w", boundName(server), ErrUnknownServer)
	}
	uh := m.userHash(user)
	e, err := m.entry(ctx, uh, server)
	if err != nil {
		return Retry{}, fmt.Errorf("server '%s': %w", server, err)
	}
	if e == nil {
		return Retry{}, ErrNotConnected
	}
	switch status {
	case http.StatusForbidden:
		return m.forbidden(server, e, wwwAuthenticate)
	case http.StatusUnauthorized:
	default:
		return Retry{}, fmt.Errorf("server '%s': HTTP %d is not a refusal Rejected handles", server, status)
	}
	if e.Access != sent.Reveal() {
		return Retry{Again: true}, nil // a newer token is stored
	}
	if e.Refresh == "" || e.ViaReject {
		if _, err := m.store.deleteToken(ctx, uh, server); err != nil {
			return Retry{}, fmt.Errorf("server '%s': %w", server, err)
		}
		return Retry{}, ErrNotConnected
	}
	if _, err := m.refreshShared(ctx, uh, server, e.Access, true); err != nil {
		return Retry{}, err
	}
	return Retry{Again: true}, nil
}

// AnyRejected handles the server's 401 to a token AnyToken gave (the
// mux's own requests, such as discovery): the user it belongs to has it
// refreshed once, else dropped, so that they are asked to connect again
// (the server may have moved to another authorization server). A token
// no user holds any more is ignored.
func (m *Manager) AnyRejected(ctx context.Context, server string, sent secret.Value) error {
	if _, ok := m.server(server); !ok {
		return fmt.Errorf("server '%s': %w", boundName(server), ErrUnknownServer)
	}
	uhs, _, err := m.store.users(ctx, server, usersShown)
	if err != nil {
		return err
	}
	for _, uh := range uhs {
		e, err := m.entry(ctx, uh, server)
		if err != nil || e == nil || e.Access != sent.Reveal() {
			continue
		}
		if e.Refresh == "" || e.ViaReject {
			_, err := m.store.deleteToken(ctx, uh, server)
			return err
		}
		_, err = m.refreshShared(ctx, uh, server, e.Access, true)
		if errors.Is(err, ErrNotConnected) {
			return nil // dropped
		}
		return err
	}
	return nil
}

// forbidden handles a 403: only insufficient_scope with new scopes asks
// for a step-up.
func (m *Manager) forbidden(server string, e *entry, www []string) (Retry, error) {
	www = slices.DeleteFunc(slices.Clone(www[:min(len(www), maxChallenges)]), func(h string) bool { return len(h) > maxChallengeLen })
	cs, _ := oauthex.ParseWWWAuthenticate(www)
	if headers.ChallengeParam(cs, "error") != "insufficient_scope" {
		return Retry{}, fmt.Errorf("server '%s' refused the call (HTTP 403)", server)
	}
	want := union(slices.DeleteFunc(strings.Fields(headers.ChallengeScope(cs)), func(s string) bool {
		return len(s) > maxScopeLen || strings.ContainsRune(s, '"')
	}))
	have := union(e.Scopes, e.Asked)
	switch {
	case len(want) == 0:
		return Retry{}, fmt.Errorf("server '%s' refused the call for its scope but named none (HTTP 403)", server)
	case !slices.ContainsFunc(want, func(s string) bool { return !slices.Contains(have, s) }):
		return Retry{}, fmt.Errorf("server '%s' refuses even with scopes %q", server, strings.Join(want, " "))
	}
	return Retry{StepUp: want}, nil
}

// Connected reports whether the user has a vault entry for server.
func (m *Manager) Connected(ctx context.Context, user, server string) (bool, error) {
	if err := checkUser(user); err != nil {
		return false, err
	}
	if len(server) > maxServerLen {
		return false, nil
	}
	e, err := m.entry(ctx, m.userHash(user), server)
	return e != nil, err
}

// Disconnect deletes the user's tokens for server, or for every server
// when server is ""; it reports whether there were any.
func (m *Manager) Disconnect(ctx context.Context, user, server string) (bool, error) {
	if err := checkUser(user); err != nil {
		return false, err
	}
	if len(server) > maxServerLen {
		return false, nil
	}
	uh := m.userHash(user)
	names := []string{server}
	if server == "" {
		var err error
		if names, err = m.store.servers(ctx, uh); err != nil {
			return false, err
		}
	}
	any := false
	for _, s := range names {
		ok, err := m.store.deleteToken(ctx, uh, s)
		if err != nil {
			return any, err
		}
		any = any || ok
	}
	return any, nil
}

// AnyToken returns some connected user's valid token for server (to list
// a per-user server's tools); ErrNotConnected when there is none.
func (m *Manager) AnyToken(ctx context.Context, server string) (secret.Value, error) {
	if _, ok := m.server(server); !ok {
		return "", fmt.Errorf("server '%s': %w", boundName(server), ErrUnknownServer)
	}
	uhs, _, err := m.store.users(ctx, server, usersShown)
	if err != nil {
		return "", err
	}
	for _, uh := range uhs {
		if tok, err := m.token(ctx, uh, server); err == nil {
			return tok, nil
		}
	}
	return "", ErrNotConnected
}
