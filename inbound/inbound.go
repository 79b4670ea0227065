// Package inbound establishes who is calling mcp-mux.
//
// An Authenticator checks each HTTP request according to the configured
// mode — none, trusted_header, api_keys or jwt — and yields the caller's user
// id, which scopes upstream sessions and per-user credentials. A request that
// fails gets 401 with a WWW-Authenticate challenge; it never reaches the MCP
// handler. Credentials are compared in constant time and never logged.
package inbound

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// Modes of caller identification.
const (
	ModeNone          = "none"
	ModeTrustedHeader = "trusted_header"
	ModeAPIKeys       = "api_keys"
	ModeJWT           = "jwt"
)

// DefaultUser is the user of unauthenticated (mode none) requests.
const DefaultUser = "default"

// Options configure an Authenticator.
type Options struct {
	Mode       string
	UserHeader string            // trusted_header: the header naming the user
	Keys       map[string]string // api_keys: user id → key
	JWKSURL    string            // jwt
	Issuer     string            // jwt
	Audience   string            // jwt
	UserClaim  string            // jwt; default "sub"
	// ResourceURL is the public URL of the /mcp endpoint, announced in the
	// protected-resource metadata (jwt). Empty: derived from each request.
	ResourceURL string
	HTTPClient  *http.Client // JWKS fetches; nil = 10 s timeout client
	Logger      hclog.Logger
	// Now is the clock for token validation; nil = time.Now.
	Now func() time.Time
}

// Authenticator identifies callers. It is safe for concurrent use.
type Authenticator struct {
	opts Options
	log  hclog.Logger
	keys []apiKey
	jwks *keyCache
}

type apiKey struct {
	user string
	key  []byte
}

// ErrUnauthenticated is wrapped by every authentication failure.
var ErrUnauthenticated = errors.New("unauthenticated")

// New validates opts; it does no I/O.
func New(opts Options) (*Authenticator, error) {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	a := &Authenticator{opts: opts, log: opts.Logger}
	switch opts.Mode {
	case "", ModeNone:
		a.opts.Mode = ModeNone
	case ModeTrustedHeader:
		if opts.UserHeader == "" {
			return nil, errors.New("trusted_header mode needs a user header")
		}
	case ModeAPIKeys:
		for user, k := range opts.Keys {
			if k == "" {
				return nil, fmt.Errorf("api key for user %q is empty", user)
			}
			a.keys = append(a.keys, apiKey{user: user, key: []byte(k)})
		}
		if len(a.keys) == 0 {
			return nil, errors.New("api_keys mode needs at least one key")
		}
	case ModeJWT:
		if opts.JWKSURL == "" || opts.Issuer == "" || opts.Audience == "" {
			return nil, errors.New("jwt mode needs jwks_url, issuer and audience")
		}
		if a.opts.UserClaim == "" {
			a.opts.UserClaim = "sub"
		}
		hc := opts.HTTPClient
		if hc == nil {
			hc = &http.Client{Timeout: 10 * time.Second}
		}
		a.jwks = &keyCache{url: opts.JWKSURL, client: hc, now: opts.Now}
	default:
		return nil, fmt.Errorf("unknown auth mode %q", opts.Mode)
	}
	return a, nil
}

// Mode returns the configured mode.
func (a *Authenticator) Mode() string { return a.opts.Mode }

// Authenticate returns the user id of r's caller.
func (a *Authenticator) Authenticate(r *http.Request) (string, error) {
	switch a.opts.Mode {
	case ModeTrustedHeader:
		u := strings.TrimSpace(r.Header.Get(a.opts.UserHeader))
		if u == "" {
			return "", fmt.Errorf("%w: missing %s header", ErrUnauthenticated, a.opts.UserHeader)
		}
		return u, nil
	case ModeAPIKeys:
		tok, ok := bearer(r)
		if !ok {
			return "", fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
		}
		user := ""
		for _, k := range a.keys {
			// Compare against every key so timing does not reveal which matched.
			if subtle.ConstantTimeCompare([]byte(tok), k.key) == 1 {
				user = k.user
			}
		}
		if user == "" {
			return "", fmt.Errorf("%w: unknown api key", ErrUnauthenticated)
		}
		return user, nil
	case ModeJWT:
		tok, ok := bearer(r)
		if !ok {
			return "", fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
		}
		return a.verifyJWT(r.Context(), tok)
	}
	return DefaultUser, nil
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

var jwtAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

const clockSkew = time.Minute

func (a *Authenticator) verifyJWT(ctx context.Context, raw string) (string, error) {
	tok, err := jwt.ParseSigned(raw, jwtAlgs)
	if err != nil {
		return "", fmt.Errorf("%w: malformed token", ErrUnauthenticated)
	}
	if len(tok.Headers) != 1 {
		return "", fmt.Errorf("%w: token must have one signature", ErrUnauthenticated)
	}
	key, err := a.jwks.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	var std jwt.Claims
	var all map[string]any
	if err := tok.Claims(key, &std, &all); err != nil {
		return "", fmt.Errorf("%w: bad signature", ErrUnauthenticated)
	}
	if std.Expiry == nil {
		return "", fmt.Errorf("%w: token has no expiry", ErrUnauthenticated)
	}
	exp := jwt.Expected{Issuer: a.opts.Issuer, AnyAudience: jwt.Audience{a.opts.Audience}, Time: a.opts.Now()}
	if err := std.ValidateWithLeeway(exp, clockSkew); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	user, _ := all[a.opts.UserClaim].(string)
	if user == "" {
		return "", fmt.Errorf("%w: token has no %q claim", ErrUnauthenticated, a.opts.UserClaim)
	}
	return user, nil
}

// keyCache holds a JWKS, refetched after keyTTL and on an unknown key id
// (at most once per refetchGap, so bad tokens cannot hammer the issuer).
type keyCache struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	set     *jose.JSONWebKeySet
	fetched time.Time
	tried   time.Time
}

const (
	keyTTL     = 10 * time.Minute
	refetchGap = 30 * time.Second
)

func (c *keyCache) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.set == nil || now.Sub(c.fetched) > keyTTL {
		if err := c.fetchLocked(ctx, now); err != nil && c.set == nil {
			return nil, err
		}
	}
	if k := pick(c.set, kid); k != nil {
		return k, nil
	}
	if now.Sub(c.tried) >= refetchGap {
		if err := c.fetchLocked(ctx, now); err != nil {
			return nil, err
		}
		if k := pick(c.set, kid); k != nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("no signing key %q", kid)
}

func pick(set *jose.JSONWebKeySet, kid string) *jose.JSONWebKey {
	if set == nil {
		return nil
	}
	if kid != "" {
		if ks := set.Key(kid); len(ks) > 0 {
			return &ks[0]
		}
		return nil
	}
	if len(set.Keys) == 1 {
		return &set.Keys[0]
	}
	return nil
}

func (c *keyCache) fetchLocked(ctx context.Context, now time.Time) error {
	c.tried = now
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return fmt.Errorf("jwks url: %w", err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("fetching jwks: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetching jwks: HTTP %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("decoding jwks: %w", err)
	}
	c.set, c.fetched = &set, now
	return nil
}

// MetadataPath is where the protected-resource metadata is served (jwt mode).
const MetadataPath = "/.well-known/oauth-protected-resource"

// MetadataHandler serves RFC 9728 protected-resource metadata naming the
// issuer as the authorization server (jwt mode only; nil otherwise).
func (a *Authenticator) MetadataHandler() http.Handler {
	if a.opts.Mode != ModeJWT {
		return nil
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		md := &oauthex.ProtectedResourceMetadata{
			Resource:               a.resourceURL(r),
			AuthorizationServers:   []string{a.opts.Issuer},
			BearerMethodsSupported: []string{"header"},
		}
		auth.ProtectedResourceMetadataHandler(md).ServeHTTP(w, r)
	})
}

func (a *Authenticator) resourceURL(r *http.Request) string {
	if a.opts.ResourceURL != "" {
		return a.opts.ResourceURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/mcp"
}

// Challenge writes a 401 with a WWW-Authenticate header for r.
func (a *Authenticator) Challenge(w http.ResponseWriter, r *http.Request, err error) {
	c := `Bearer realm="mcp-mux"`
	if a.opts.Mode == ModeJWT {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		c += fmt.Sprintf(`, error="invalid_token", resource_metadata="%s://%s%s"`, scheme, r.Host, MetadataPath)
	}
	w.Header().Set("WWW-Authenticate", c)
	msg := "unauthenticated"
	if err != nil {
		msg = err.Error()
	}
	mcpwire.WriteError(w, http.StatusUnauthorized, nil, -32001, msg, nil)
}
