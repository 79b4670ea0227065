package headers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"

	"github.com/mcp-mux/mcp-mux/headercheck"
	"github.com/mcp-mux/mcp-mux/secret"
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

var reservedParams = []string{"grant_type", "client_id", "client_secret", "refresh_token", "scope", "audience"}

// tokenSource fetches, caches and refreshes one server's OAuth token. At most
// one fetch is in flight; callers waiting for it share its result.
type tokenSource struct {
	server     string
	opts       OAuthOptions // secrets zeroed; they live in clientSecret and refresh
	skew       time.Duration
	fields     responseFields
	static     []field
	client     *http.Client // probe and metadata requests
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

type token struct {
	value  secret.Value // the Authorization value, "<type> <token>"
	access secret.Value
	expiry time.Time
}

func newTokenSource(server string, o OAuthOptions, static []field, client *http.Client, log hclog.Logger) (*tokenSource, error) {
	switch o.GrantType {
	case "":
		o.GrantType = GrantClientCredentials
	case GrantClientCredentials, GrantRefreshToken:
	default:
		return nil, fmt.Errorf("OAuth grant_type must be '%s' or '%s'", GrantClientCredentials, GrantRefreshToken)
	}
	if o.GrantType == GrantClientCredentials && (o.ClientID == "" || o.ClientSecret == "") {
		return nil, errors.New("OAuth client_credentials requires client_id and client_secret")
	}
	if o.GrantType == GrantRefreshToken && o.RefreshToken == "" {
		return nil, errors.New("OAuth refresh_token grant requires refresh_token")
	}
	if o.TokenURL == "" && o.ResourceURL == "" {
		return nil, errors.New("OAuth needs token_url, or the server URL to discover it from")
	}
	for _, u := range []string{o.TokenURL, o.ResourceURL} {
		if u == "" {
			continue
		}
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return nil, fmt.Errorf("OAuth: %q is not an http(s) URL", secret.RedactURL(u))
		}
	}
	switch o.AuthStyle {
	case "":
		o.AuthStyle = AuthStyleAuto
	case AuthStyleAuto, AuthStyleBasic, AuthStylePost:
	default:
		return nil, fmt.Errorf("OAuth auth_style must be '%s', '%s' or '%s'", AuthStyleAuto, AuthStyleBasic, AuthStylePost)
	}
	if o.DefaultTokenType == "" {
		o.DefaultTokenType = "Bearer"
	}
	skew := o.RefreshSkew
	switch {
	case skew == 0:
		skew = 60 * time.Second
	case skew < 0:
		skew = 0
	}
	extra := make(map[string]string, len(o.ExtraParams))
	for _, k := range sortedKeys(o.ExtraParams) {
		if isReserved(k) {
			log.Warn("ignoring a reserved field in extra_token_params", "server", server, "field", k)
			continue
		}
		extra[k] = o.ExtraParams[k]
	}
	o.ExtraParams = extra

	ctx, cancel := context.WithCancel(context.Background())
	s := &tokenSource{
		server:       server,
		skew:         skew,
		fields:       newResponseFields(o.TokenField, o.TokenTypeField, o.ExpiresInField),
		static:       static,
		client:       client,
		log:          log,
		life:         ctx,
		cancelLife:   cancel,
		clientSecret: secret.Value(o.ClientSecret),
		refresh:      secret.Value(o.RefreshToken),
	}
	o.ClientSecret, o.RefreshToken = "", ""
	s.opts = o
	s.tokenHTTP = &http.Client{
		Transport:     &normalizingTransport{base: client.Transport, fields: s.fields},
		CheckRedirect: client.CheckRedirect,
		Jar:           client.Jar,
		Timeout:       client.Timeout,
	}
	return s, nil
}

func isReserved(k string) bool {
	for _, r := range reservedParams {
		if strings.EqualFold(k, r) {
			return true
		}
	}
	return false
}

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
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*token), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("MCP server '%s': waiting for an OAuth token: %w", s.server, ctx.Err())
	}
}

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
	s.mu.Lock()
	refresh := s.refresh
	s.mu.Unlock()
	if s.opts.GrantType == GrantRefreshToken {
		conf.EndpointParams.Set("refresh_token", refresh.Reveal())
	}

	ctx, cancel := context.WithTimeout(s.life, tokenTimeout)
	defer cancel()
	start := time.Now()
	tok, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, s.tokenHTTP))
	if err != nil {
		return nil, s.fetchError(conf.TokenURL, err)
	}

	typ := tok.TokenType
	if typ == "" {
		typ = s.opts.DefaultTokenType
	}
	expiresIn := 3600
	if v, ok := tok.Extra("expires_in").(float64); ok {
		expiresIn = int(min(max(v, 1), maxExpiresIn)) // the cap keeps the Duration from overflowing
	}
	value := typ + " " + tok.AccessToken
	if err := headercheck.CheckValue(value); err != nil {
		return nil, &DenyError{Msg: fmt.Sprintf("OAuth token for MCP server '%s' cannot be sent as an HTTP header value: "+
			"the Authorization value %v. Check what the token endpoint returned for this server.", s.server, err)}
	}
	t := &token{
		value:  secret.Value(value),
		access: secret.Value(tok.AccessToken),
		expiry: start.Add(time.Duration(expiresIn) * time.Second),
	}
	rotated := false
	s.mu.Lock()
	if tok.RefreshToken != "" && tok.RefreshToken != s.refresh.Reveal() {
		s.refresh = secret.Value(tok.RefreshToken)
		rotated = true
	}
	s.cur = t
	s.mu.Unlock()
	s.log.Debug("oauth token fetched", "server", s.server, "expires_in", expiresIn, "refresh_token_rotated", rotated)
	return t, nil
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
	o := s.opts
	ep := endpoint{tokenURL: o.TokenURL, scope: o.Scope}
	if ep.tokenURL == "" {
		ctx, cancel := context.WithTimeout(s.life, tokenTimeout)
		d, err := s.discover(ctx)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("MCP server '%s': discovering the OAuth token endpoint: %w", s.server, err)
		}
		ep = d
		if o.Scope != "" {
			ep.scope = o.Scope
		}
		s.log.Debug("oauth token endpoint discovered", "server", s.server, "token_endpoint", secret.RedactURL(ep.tokenURL))
	}

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
	conf = &clientcredentials.Config{
		ClientID:       o.ClientID,
		ClientSecret:   s.clientSecret.Reveal(),
		TokenURL:       ep.tokenURL,
		EndpointParams: params,
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

func authStyle(style string, advertised []string) oauth2.AuthStyle {
	switch style {
	case AuthStyleBasic:
		return oauth2.AuthStyleInHeader
	case AuthStylePost:
		return oauth2.AuthStyleInParams
	}
	for _, m := range advertised {
		if m == "client_secret_basic" {
			return oauth2.AuthStyleInHeader
		}
	}
	for _, m := range advertised {
		if m == "client_secret_post" {
			return oauth2.AuthStyleInParams
		}
	}
	return oauth2.AuthStyleAutoDetect
}

// fetchError turns a token request failure into a message that names the
// server and what went wrong but never includes the response body, which
// x/oauth2's RetrieveError.Error would.
func (s *tokenSource) fetchError(tokenURL string, err error) error {
	prefix := fmt.Sprintf("MCP server '%s': ", s.server)
	var missing *missingFieldError
	if errors.As(err, &missing) {
		return fmt.Errorf("%sOAuth token response missing '%s'", prefix, missing.field)
	}
	if errors.Is(err, errMalformedResponse) {
		return fmt.Errorf("%sOAuth token endpoint %s returned a response that is neither a JSON object nor form-encoded", prefix, secret.RedactURL(tokenURL))
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := fmt.Sprintf("%sOAuth token endpoint %s refused the request", prefix, secret.RedactURL(tokenURL))
		if re.Response != nil {
			msg += fmt.Sprintf(" (HTTP %d)", re.Response.StatusCode)
		}
		if code := safeErrorCode(re.ErrorCode); code != "" {
			msg += ": " + code
		}
		return errors.New(msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		inner := ue.Err
		if errors.Is(inner, context.DeadlineExceeded) {
			return fmt.Errorf("%sOAuth token request to %s timed out after %s: %w", prefix, secret.RedactURL(tokenURL), tokenTimeout, inner)
		}
		return fmt.Errorf("%sOAuth token request to %s failed: %w", prefix, secret.RedactURL(tokenURL), inner)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%sOAuth token request to %s: %w", prefix, secret.RedactURL(tokenURL), err)
	}
	// Anything else comes from x/oauth2 parsing, whose message may quote the body.
	return fmt.Errorf("%sOAuth token request to %s failed", prefix, secret.RedactURL(tokenURL))
}

// safeErrorCode returns an RFC 6749 error code if it looks like one (it is
// server-controlled text, so anything else is dropped).
func safeErrorCode(code string) string {
	if code == "" || len(code) > 64 {
		return ""
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-' || c == '.') {
			return ""
		}
	}
	return code
}
