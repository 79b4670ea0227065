package headers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/attribute"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcp-mux/mcp-mux/internal/headercheck"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

// RFC 8693 names.
const (
	GrantTokenExchange = "urn:ietf:params:oauth:grant-type:token-exchange"
	TokenTypeAccess    = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT       = "urn:ietf:params:oauth:token-type:jwt"
)

// Bounds of a server's token exchanges and their cache.
const (
	exchangeCacheSize   = 4096 // exchanged tokens kept per server
	exchangePerCaller   = 8    // of which one caller (user id) may hold
	exchangeDefaultLife = 300  // seconds, when the response has no expires_in
	// exchangeConcurrency bounds the exchanges in flight per server; more
	// wait their turn (as long as a caller waits for them).
	exchangeConcurrency = 32
	// exchangeFlightsPerCaller bounds the exchanges in flight (or waiting
	// their turn) for one user id, one per subject token; past it a call
	// is denied at once.
	exchangeFlightsPerCaller = 4
)

// ExchangeOptions is a server's token_exchange block: the caller's inbound
// token is exchanged at TokenURL (RFC 8693) for the token sent upstream.
type ExchangeOptions struct {
	TokenURL     string // required, http(s)
	ClientID     string // required
	ClientSecret string
	AuthStyle    string // AuthStyleAuto ("" too), AuthStyleBasic or AuthStylePost

	// SubjectHeader is the inbound request header holding the caller's
	// token ("" = Authorization); a "Bearer " prefix is stripped. In jwt
	// inbound mode the Authorization bearer is the token mcp-mux verified.
	SubjectHeader    string
	SubjectTokenType string // "" = TokenTypeAccess

	Audience, Resource, Scope string
	RequestedTokenType        string // "" = TokenTypeAccess

	ActorToken     string // optional
	ActorTokenType string // "" = TokenTypeAccess (sent only with ActorToken)

	// Header is the upstream header the exchanged token goes in ("" =
	// Authorization), as "<TokenPrefix> <token>", or the bare token when
	// TokenPrefix is "".
	Header      string
	TokenPrefix string

	// RefreshSkew: an exchanged token is exchanged again this long before
	// it expires, at most half its lifetime. 0 means the default of 60 s; a
	// negative value means no skew.
	RefreshSkew time.Duration
}

// check validates o and fills in its defaults. Its errors name fields,
// never a value.
func (o *ExchangeOptions) check() error {
	if o.TokenURL == "" {
		return errors.New("token_exchange.token_url is required")
	}
	if err := checkHTTPURL(o.TokenURL); err != nil {
		return fmt.Errorf("token_exchange.token_url: %w", err)
	}
	if o.ClientID == "" {
		return errors.New("token_exchange.client_id is required")
	}
	var err error
	if o.AuthStyle, err = authStyleName(o.AuthStyle); err != nil {
		return fmt.Errorf("token_exchange.%w", err)
	}
	o.SubjectHeader = cmp.Or(o.SubjectHeader, "Authorization")
	o.Header = cmp.Or(o.Header, "Authorization")
	for _, h := range []struct{ field, name string }{{"subject_header", o.SubjectHeader}, {"header", o.Header}} {
		if err := headercheck.CheckName(h.name); err != nil {
			return fmt.Errorf("token_exchange.%s: %v", h.field, err)
		}
	}
	o.SubjectTokenType = cmp.Or(o.SubjectTokenType, TokenTypeAccess)
	o.RequestedTokenType = cmp.Or(o.RequestedTokenType, TokenTypeAccess)
	o.ActorTokenType = cmp.Or(o.ActorTokenType, TokenTypeAccess)
	return nil
}

// exchanger exchanges callers' tokens for one server and caches the results
// per caller, subject token and audience. At most one exchange per key is in
// flight, shared by the callers that wait for it and cancelled when the
// last of them leaves; at most exchangeConcurrency run at once, and one
// user id has at most exchangeFlightsPerCaller in flight.
type exchanger struct {
	server     string
	opts       ExchangeOptions // secrets zeroed; they live below
	skew       time.Duration
	tokenHTTP  *http.Client
	log        hclog.Logger
	life       context.Context
	cancelLife context.CancelFunc

	clientSecret, actorToken secret.Value
	cache                    *exchangeCache
	slots                    chan struct{} // one per exchange running

	mu      sync.Mutex
	flights map[string]*flight // by exchangeKey
	callers map[string]int     // user id → flights
}

// flight is one exchange in flight. done is closed when it ends, with val
// or err set; waiters (under the exchanger's mu) counts the callers
// waiting for it, and the last to leave cancels it.
type flight struct {
	done    chan struct{}
	val     secret.Value
	err     error
	waiters int
	cancel  context.CancelFunc
}

// newExchanger checks o and builds the exchanger of one server. It does no I/O.
func newExchanger(server string, o ExchangeOptions, client *http.Client, log hclog.Logger) (*exchanger, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &exchanger{
		server:       server,
		skew:         refreshSkew(o.RefreshSkew),
		tokenHTTP:    tokenClient(client, newResponseFields("", "", "")),
		log:          log,
		life:         ctx,
		cancelLife:   cancel,
		clientSecret: secret.Value(o.ClientSecret),
		actorToken:   secret.Value(o.ActorToken),
		cache:        newExchangeCache(exchangeCacheSize, exchangePerCaller),
		slots:        make(chan struct{}, exchangeConcurrency),
		flights:      map[string]*flight{},
		callers:      map[string]int{},
	}
	o.ClientSecret, o.ActorToken = "", ""
	x.opts = o
	return x, nil
}

// close stops the exchanges in flight; later ones fail.
func (x *exchanger) close() { x.cancelLife() }

// subject returns the caller's token from the inbound headers in, without
// a Bearer prefix; "" when there is none.
func (x *exchanger) subject(in http.Header) string {
	v := strings.TrimSpace(in.Get(x.opts.SubjectHeader))
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		v = strings.TrimSpace(v[7:])
	}
	return v
}

// value returns the upstream header value for user, whose inbound headers
// are in: the cached exchanged token, or a new exchange. Every failure is a
// *DenyError naming the server, never a token.
func (x *exchanger) value(ctx context.Context, user string, in http.Header) (secret.Value, error) {
	subject := x.subject(in)
	if subject == "" {
		return "", &DenyError{Msg: fmt.Sprintf("MCP server '%s': token exchange needs the caller's token in the %s request header, and this request has none. "+
			"Send your access token there (as a Bearer token for Authorization).", x.server, x.opts.SubjectHeader)}
	}
	key := exchangeKey(user, subject, x.opts.Audience)
	if v, ok := x.cache.get(key, time.Now()); ok {
		return v, nil
	}
	f, err := x.join(key, user, subject)
	if err != nil {
		return "", err
	}
	select {
	case <-f.done:
		telemetry.Event(ctx, "mcp_mux.token_exchange", telemetry.ServerAttr.String(x.server), attribute.Bool("mcp_mux.ok", f.err == nil))
		return f.val, f.err
	case <-ctx.Done():
		x.leave(key, f)
		return "", fmt.Errorf("MCP server '%s': waiting for a token exchange: %w", x.server, ctx.Err())
	}
}

// join returns the exchange in flight for key, or starts one for user
// unless user has exchangeFlightsPerCaller in flight already.
func (x *exchanger) join(key, user, subject string) (*flight, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if f := x.flights[key]; f != nil {
		f.waiters++
		return f, nil
	}
	if x.callers[user] >= exchangeFlightsPerCaller {
		return nil, &DenyError{Msg: fmt.Sprintf("MCP server '%s': %d token exchanges for your account (one per access token) are in flight already; "+
			"retry when they have finished.", x.server, exchangeFlightsPerCaller)}
	}
	x.callers[user]++
	ctx, cancel := context.WithCancel(x.life)
	f := &flight{done: make(chan struct{}), waiters: 1, cancel: cancel}
	x.flights[key] = f
	go x.fly(ctx, f, key, user, subject)
	return f, nil
}

// leave is a caller of f giving up; the last one cancels f, and a later
// caller for key starts a new exchange.
func (x *exchanger) leave(key string, f *flight) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if f.waiters--; f.waiters > 0 {
		return
	}
	f.cancel()
	if x.flights[key] == f {
		delete(x.flights, key)
	}
}

// fly runs the exchange of f, in its turn, then ends it.
func (x *exchanger) fly(ctx context.Context, f *flight, key, user, subject string) {
	defer f.cancel()
	f.val, f.err = x.inTurn(ctx, key, user, subject)
	x.mu.Lock()
	if x.flights[key] == f {
		delete(x.flights, key)
	}
	if x.callers[user]--; x.callers[user] <= 0 {
		delete(x.callers, user)
	}
	x.mu.Unlock()
	close(f.done)
}

// inTurn waits for one of the server's exchange slots (as long as ctx
// lasts), then returns the cached token or exchanges subject.
func (x *exchanger) inTurn(ctx context.Context, key, user, subject string) (secret.Value, error) {
	if err := ctx.Err(); err != nil {
		return "", &DenyError{Msg: tokenError(x.server, "token exchange", x.opts.TokenURL, err).Error()}
	}
	select {
	case x.slots <- struct{}{}:
		defer func() { <-x.slots }()
	case <-ctx.Done():
		return "", &DenyError{Msg: tokenError(x.server, "token exchange", x.opts.TokenURL, ctx.Err()).Error()}
	}
	if v, ok := x.cache.get(key, time.Now()); ok {
		return v, nil // an exchange that finished just before this one was started
	}
	return x.exchange(ctx, key, user, subject)
}

// exchangeKey identifies one cache entry; it hashes the subject token, so
// the key reveals none.
func exchangeKey(user, subject, audience string) string {
	d := sha256.New()
	for _, s := range []string{user, subject, audience} {
		d.Write([]byte(s))
		d.Write([]byte{0})
	}
	return hex.EncodeToString(d.Sum(nil))
}

// exchange does one token exchange for subject, within ctx and
// tokenTimeout, and caches its result under key; only one runs per key at
// a time.
func (x *exchanger) exchange(ctx context.Context, key, user, subject string) (secret.Value, error) {
	conf := x.config(subject)
	ctx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	start := time.Now()
	tok, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, x.tokenHTTP))
	if err != nil {
		x.log.Debug("token exchange failed", "server", x.server)
		return "", &DenyError{Msg: tokenError(x.server, "token exchange", x.opts.TokenURL, err).Error()}
	}
	value := tok.AccessToken
	if x.opts.TokenPrefix != "" {
		value = x.opts.TokenPrefix + " " + value
	}
	if err := headercheck.CheckValue(value); err != nil {
		return "", &DenyError{Msg: fmt.Sprintf("MCP server '%s': the token exchange endpoint returned a token that cannot be sent as the %s header: it %v.", x.server, x.opts.Header, err)}
	}
	life := exchangeLifetime(tok)
	expiry := start.Add(life)
	x.cache.put(key, user, secret.Value(value), expiry.Add(-min(x.skew, life/2)))
	x.log.Debug("token exchanged", "server", x.server, "expires_in", int(life/time.Second))
	return secret.Value(value), nil
}

// exchangeLifetime returns tok's expires_in, between 1 s and maxExpiresIn,
// or exchangeDefaultLife when it has none.
func exchangeLifetime(tok *oauth2.Token) time.Duration {
	s := float64(exchangeDefaultLife)
	if v, ok := tok.Extra("expires_in").(float64); ok {
		s = min(max(v, 1), maxExpiresIn)
	}
	return time.Duration(s) * time.Second
}

// config returns the x/oauth2 request of one exchange of subject: the
// client_credentials request with its grant type replaced, as
// clientcredentials.Config allows, and the RFC 8693 fields.
func (x *exchanger) config(subject string) *clientcredentials.Config {
	o := x.opts
	p := url.Values{
		"grant_type":           {GrantTokenExchange},
		"subject_token":        {subject},
		"subject_token_type":   {o.SubjectTokenType},
		"requested_token_type": {o.RequestedTokenType},
	}
	for k, v := range map[string]string{"audience": o.Audience, "resource": o.Resource, "scope": o.Scope} {
		if v != "" {
			p.Set(k, v)
		}
	}
	if !x.actorToken.IsZero() {
		p.Set("actor_token", x.actorToken.Reveal())
		p.Set("actor_token_type", o.ActorTokenType)
	}
	return &clientcredentials.Config{
		ClientID:       o.ClientID,
		ClientSecret:   x.clientSecret.Reveal(),
		TokenURL:       o.TokenURL,
		EndpointParams: p,
		AuthStyle:      authStyle(o.AuthStyle, nil),
	}
}

// invalidate drops the cached token whose header value is sent, so the
// next call exchanges again.
func (x *exchanger) invalidate(sent string) {
	if x.cache.dropValue(sent) {
		x.log.Debug("exchanged token refused by the upstream; the next call exchanges again", "server", x.server)
	}
}
