package inbound

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// jwtAlgs are the signature algorithms a token may use: asymmetric ones
// only, so a public key never verifies an HMAC.
var jwtAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA}

// clockSkew is the leeway of the time claims.
const clockSkew = time.Minute

// verifyJWT checks the signature, expiry, issuer and audience of the token
// raw and returns its user claim (and profile claim, if configured).
func (a *Authenticator) verifyJWT(ctx context.Context, raw string) (Identity, error) {
	std, all, err := a.claims(ctx, raw)
	if err != nil {
		return Identity{}, err
	}
	if std.Expiry == nil {
		return Identity{}, fmt.Errorf("%w: token has no expiry", ErrUnauthenticated)
	}
	exp := jwt.Expected{Issuer: a.opts.Issuer, AnyAudience: jwt.Audience{a.opts.Audience}, Time: a.opts.Now()}
	if err := std.ValidateWithLeeway(exp, clockSkew); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	user, _ := all[a.opts.UserClaim].(string)
	if user == "" {
		return Identity{}, fmt.Errorf("%w: token has no %q claim", ErrUnauthenticated, a.opts.UserClaim)
	}
	id := Identity{User: user}
	if a.opts.ProfileClaim != "" {
		id.Claim, _ = all[a.opts.ProfileClaim].(string)
	}
	return id, nil
}

// claims parses the token raw, checks its one signature with the issuer's
// key, and returns its standard claims and all of them.
func (a *Authenticator) claims(ctx context.Context, raw string) (jwt.Claims, map[string]any, error) {
	var std jwt.Claims
	tok, err := jwt.ParseSigned(raw, jwtAlgs)
	if err != nil {
		return std, nil, fmt.Errorf("%w: malformed token", ErrUnauthenticated)
	}
	if len(tok.Headers) != 1 {
		return std, nil, fmt.Errorf("%w: token must have one signature", ErrUnauthenticated)
	}
	key, err := a.jwks.key(ctx, tok.Headers[0].KeyID)
	if err != nil {
		return std, nil, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	var all map[string]any
	if err := tok.Claims(key, &std, &all); err != nil {
		return std, nil, fmt.Errorf("%w: bad signature", ErrUnauthenticated)
	}
	return std, all, nil
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

// How long a key set is used, and how often an unknown key id may make the
// cache refetch it.
const (
	keyTTL     = 10 * time.Minute
	refetchGap = 30 * time.Second
)

// key returns the signing key kid names (the only key, for no kid),
// refetching the set when it is stale or, at most once per refetchGap,
// when it lacks the key.
func (c *keyCache) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if err := c.freshLocked(ctx, now); err != nil {
		return nil, err
	}
	k := pick(c.set, kid)
	if k == nil && now.Sub(c.tried) >= refetchGap {
		if err := c.fetchLocked(ctx, now); err != nil {
			return nil, err
		}
		k = pick(c.set, kid)
	}
	if k == nil {
		return nil, fmt.Errorf("no signing key %q", kid)
	}
	return k, nil
}

// freshLocked refetches the set when there is none or it is older than
// keyTTL; a failed refetch is an error only when there is no set to keep
// using.
func (c *keyCache) freshLocked(ctx context.Context, now time.Time) error {
	if c.set != nil && now.Sub(c.fetched) <= keyTTL {
		return nil
	}
	if err := c.fetchLocked(ctx, now); err != nil && c.set == nil {
		return err
	}
	return nil
}

// pick returns the key of set that kid names, or its only key when kid is
// empty; nil when there is none.
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

// fetchLocked fetches the key set; c.mu is held.
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

// resourceURL is the resource the metadata names: the configured URL, else
// r's /mcp.
func (a *Authenticator) resourceURL(r *http.Request) string {
	if a.opts.ResourceURL != "" {
		return a.opts.ResourceURL
	}
	return scheme(r) + "://" + r.Host + "/mcp"
}
