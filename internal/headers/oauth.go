package headers

import (
	"context"
	"fmt"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"

	"github.com/mcp-mux/mcp-mux/internal/headercheck"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// Grant types.
const (
	GrantClientCredentials = "client_credentials"
	GrantRefreshToken      = "refresh_token"
)

// Client authentication styles at the token endpoint.
const (
	AuthStyleAuto  = "auto"  // x/oauth2 AutoDetect, or what discovered metadata advertises
	AuthStyleBasic = "basic" // client_secret_basic
	AuthStylePost  = "post"  // client_secret_post
)

// OAuthOptions is DeerFlow's oauth block plus token URL discovery and auth_style.
type OAuthOptions struct {
	// TokenURL is the token endpoint. "" = discover it from ResourceURL as the
	// MCP authorization spec says: an unauthenticated request to ResourceURL,
	// its 401 WWW-Authenticate resource_metadata (else the well-known URLs),
	// the protected resource metadata, its first authorization server, that
	// server's metadata, and finally its token_endpoint.
	TokenURL    string
	ResourceURL string // the upstream MCP URL

	GrantType string // GrantClientCredentials ("" too) or GrantRefreshToken
	ClientID  string
	Scope     string
	Audience  string

	ClientSecret string
	RefreshToken string // initial refresh token; rotated ones are kept in memory only

	// Names of the token response fields; defaults access_token, token_type,
	// expires_in. DefaultTokenType (default Bearer) is used when the response
	// has no token type.
	TokenField, TokenTypeField, ExpiresInField, DefaultTokenType string

	// RefreshSkew: a token is refreshed this long before it expires. 0 means
	// the default of 60 s; a negative value means no skew.
	RefreshSkew time.Duration

	// ExtraParams are added to the token request; the reserved fields
	// (grant_type, client_id, client_secret, refresh_token, scope, audience)
	// cannot be overridden and are dropped with a warning.
	ExtraParams map[string]string

	AuthStyle string // AuthStyleAuto ("" too), AuthStyleBasic or AuthStylePost
}

// maxExpiresIn caps expires_in (ten years, in seconds).
const maxExpiresIn = 10 * 365 * 24 * 3600

// tokenSource fetches, caches and refreshes one server's OAuth token. At most
// one fetch is in flight; callers waiting for it share its result.
type tokenSource struct {
	server     string
	opts       OAuthOptions // secrets zeroed; they live in clientSecret and refresh
	skew       time.Duration
	fields     responseFields
	static     []field
	client     *http.Client // probe and metadata requests; no redirects
	tokenHTTP  *http.Client // token requests, with the response-normalizing transport
	log        hclog.Logger
	life       context.Context
	cancelLife context.CancelFunc

	clientSecret secret.Value
	flight       singleflight.Group

	mu      sync.Mutex
	cur     *token
	refresh secret.Value              // current refresh token (rotated in memory)
	conf    *clientcredentials.Config // built on the first fetch, after any discovery
}

// token is one fetched OAuth token.
type token struct {
	value  secret.Value // the Authorization value, "<type> <token>"
	access secret.Value
	expiry time.Time
}

// newTokenSource checks o, fills in its defaults and builds the token source
// of one server. It does no I/O.
func newTokenSource(server string, o OAuthOptions, static []field, client *http.Client, log hclog.Logger) (*tokenSource, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	o.ExtraParams = unreservedParams(server, o.ExtraParams, log)
	ctx, cancel := context.WithCancel(context.Background())
	s := &tokenSource{
		server:       server,
		skew:         refreshSkew(o.RefreshSkew),
		fields:       newResponseFields(o.TokenField, o.TokenTypeField, o.ExpiresInField),
		static:       static,
		client:       WithoutRedirects(client),
		log:          log,
		life:         ctx,
		cancelLife:   cancel,
		clientSecret: secret.Value(o.ClientSecret),
		refresh:      secret.Value(o.RefreshToken),
	}
	o.ClientSecret, o.RefreshToken = "", ""
	s.opts = o
	s.tokenHTTP = tokenClient(client, s.fields)
	return s, nil
}

// tokenClient returns a copy of client whose transport normalizes token
// responses to fields and which follows no redirect.
func tokenClient(client *http.Client, fields responseFields) *http.Client {
	c := WithoutRedirects(client)
	c.Transport = &normalizingTransport{base: client.Transport, fields: fields}
	return c
}

// WithoutRedirects returns a copy of client that follows no redirect:
// every credential request (token, refresh, exchange, discovery) goes
// where it was configured or discovered, or fails, so that no client
// secret, refresh token or caller's token is ever re-sent to a URL an
// endpoint names.
func WithoutRedirects(client *http.Client) *http.Client {
	return &http.Client{Transport: client.Transport, Jar: client.Jar, Timeout: client.Timeout, CheckRedirect: RefuseRedirect}
}

// RefuseRedirect is the CheckRedirect of credential requests; its error
// names the status, never the redirect's target or body.
func RefuseRedirect(req *http.Request, _ []*http.Request) error {
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	return fmt.Errorf("it answered HTTP %d, a redirect, and mcp-mux follows no redirect on a credential request", status)
}

// close stops a fetch in flight; later fetches fail.
func (s *tokenSource) close() { s.cancelLife() }

// cached returns the current token if it is not within skew of expiring.
func (s *tokenSource) cached() *token {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && time.Now().Before(s.cur.expiry.Add(-s.skew)) {
		return s.cur
	}
	return nil
}

// token returns a usable token, fetching one if needed. The fetch runs
// detached from ctx, so a caller that gives up does not fail the others.
func (s *tokenSource) token(ctx context.Context) (*token, error) {
	if t := s.cached(); t != nil {
		return t, nil
	}
	ch := s.flight.DoChan("token", func() (any, error) {
		// A fetch that finished just before this one was started already did the work.
		if t := s.cached(); t != nil {
			return t, nil
		}
		return s.fetch()
	})
	select {
	case r := <-ch:
		telemetry.Event(ctx, "mcp_mux.oauth.token", telemetry.ServerAttr.String(s.server), attribute.Bool("mcp_mux.ok", r.Err == nil))
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*token), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("MCP server '%s': waiting for an OAuth token: %w", s.server, ctx.Err())
	}
}

// invalidate drops the current token when sent (an Authorization value or
// a bare access token) is it, so the next caller fetches a new one.
func (s *tokenSource) invalidate(sent string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || (sent != s.cur.value.Reveal() && sent != s.cur.access.Reveal()) {
		return
	}
	s.cur = nil
	s.log.Debug("oauth token refused by the upstream; the next call fetches a new one", "server", s.server)
}

// fetch requests a new token; only one runs at a time (singleflight).
func (s *tokenSource) fetch() (*token, error) {
	conf, err := s.config()
	if err != nil {
		return nil, err
	}
	if s.opts.GrantType == GrantRefreshToken {
		conf.EndpointParams.Set("refresh_token", s.refreshToken().Reveal())
	}

	ctx, cancel := context.WithTimeout(s.life, tokenTimeout)
	defer cancel()
	start := time.Now()
	tok, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, s.tokenHTTP))
	if err != nil {
		return nil, s.fetchError(conf.TokenURL, err)
	}
	t, expiresIn, err := s.newToken(tok, start)
	if err != nil {
		return nil, err
	}
	rotated := s.keep(t, tok.RefreshToken)
	s.log.Debug("oauth token fetched", "server", s.server, "expires_in", expiresIn, "refresh_token_rotated", rotated)
	return t, nil
}

// refreshToken returns the current refresh token.
func (s *tokenSource) refreshToken() secret.Value {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refresh
}

// newToken turns the token endpoint's answer to a request sent at start
// into a token, with its lifetime in seconds. A token that cannot be sent as
// a header value is a *DenyError.
func (s *tokenSource) newToken(tok *oauth2.Token, start time.Time) (*token, int, error) {
	typ := tok.TokenType
	if typ == "" {
		typ = s.opts.DefaultTokenType
	}
	expiresIn := expiresInSeconds(tok)
	value := typ + " " + tok.AccessToken
	if err := headercheck.CheckValue(value); err != nil {
		return nil, 0, &DenyError{Msg: fmt.Sprintf("OAuth token for MCP server '%s' cannot be sent as an HTTP header value: "+
			"the Authorization value %v. Check what the token endpoint returned for this server.", s.server, err)}
	}
	return &token{
		value:  secret.Value(value),
		access: secret.Value(tok.AccessToken),
		expiry: start.Add(time.Duration(expiresIn) * time.Second),
	}, expiresIn, nil
}

// expiresInSeconds returns tok's expires_in, between 1 and maxExpiresIn, or
// an hour when it has none.
func expiresInSeconds(tok *oauth2.Token) int {
	if v, ok := tok.Extra("expires_in").(float64); ok {
		return int(min(max(v, 1), maxExpiresIn)) // the cap keeps the Duration from overflowing
	}
	return 3600
}

// keep makes t the current token and, when the token endpoint sent a new
// refresh token, keeps that one; it reports whether it did.
func (s *tokenSource) keep(t *token, refreshToken string) (rotated bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if refreshToken != "" && refreshToken != s.refresh.Reveal() {
		s.refresh = secret.Value(refreshToken)
		rotated = true
	}
	s.cur = t
	return rotated
}

// config returns the x/oauth2 client configuration, discovering the token
// endpoint first if none was configured. A failed discovery is not cached.
func (s *tokenSource) config() (*clientcredentials.Config, error) {
	s.mu.Lock()
	conf := s.conf
	s.mu.Unlock()
	if conf != nil {
		return conf, nil
	}
	ep, err := s.endpoint()
	if err != nil {
		return nil, err
	}
	o := s.opts
	conf = &clientcredentials.Config{
		ClientID:       o.ClientID,
		ClientSecret:   s.clientSecret.Reveal(),
		TokenURL:       ep.tokenURL,
		EndpointParams: s.endpointParams(ep),
		AuthStyle:      authStyle(o.AuthStyle, ep.authMethods),
	}
	if o.ClientID == "" {
		conf.AuthStyle = oauth2.AuthStyleInParams // nothing to put in a Basic header
	}
	s.mu.Lock()
	s.conf = conf
	s.mu.Unlock()
	return conf, nil
}

// endpoint returns the configured token endpoint, or discovers one from
// the resource URL; a configured scope wins over a discovered one.
func (s *tokenSource) endpoint() (endpoint, error) {
	o := s.opts
	if o.TokenURL != "" {
		return endpoint{tokenURL: o.TokenURL, scope: o.Scope}, nil
	}
	ctx, cancel := context.WithTimeout(s.life, tokenTimeout)
	ep, err := s.discover(ctx)
	cancel()
	if err != nil {
		return endpoint{}, fmt.Errorf("MCP server '%s': discovering the OAuth token endpoint: %w", s.server, err)
	}
	if o.Scope != "" {
		ep.scope = o.Scope
	}
	s.log.Debug("oauth token endpoint discovered", "server", s.server, "token_endpoint", secret.RedactURL(ep.tokenURL))
	return ep, nil
}

// endpointParams returns the fields every token request to ep carries:
// the extra parameters, the resource indicator, scope, audience and, for
// the refresh grant, the grant type.
func (s *tokenSource) endpointParams(ep endpoint) url.Values {
	o := s.opts
	params := url.Values{}
	for k, v := range o.ExtraParams {
		params.Set(k, v)
	}
	if ep.resource != "" && !params.Has("resource") {
		params.Set("resource", ep.resource) // RFC 8707, required by the MCP authorization spec
	}
	if ep.scope != "" {
		params.Set("scope", ep.scope)
	}
	if o.Audience != "" {
		params.Set("audience", o.Audience)
	}
	if o.GrantType == GrantRefreshToken {
		// clientcredentials.Config lets grant_type be overridden for exactly this kind of interoperability.
		params.Set("grant_type", GrantRefreshToken)
	}
	return params
}

// authStyle returns how the client authenticates at the token endpoint: as
// configured, else as the server's metadata advertises (Basic first), else
// x/oauth2's detection.
func authStyle(style string, advertised []string) oauth2.AuthStyle {
	switch style {
	case AuthStyleBasic:
		return oauth2.AuthStyleInHeader
	case AuthStylePost:
		return oauth2.AuthStyleInParams
	}
	if slices.Contains(advertised, "client_secret_basic") {
		return oauth2.AuthStyleInHeader
	}
	if slices.Contains(advertised, "client_secret_post") {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}
