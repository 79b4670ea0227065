package inbound

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
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
	return a.identity(all)
}

// identity reads the caller from the claims of a verified token: the user
// claim, a string of at most bounds.User printable bytes, and the profile
// claim as it is (profile selection judges it).
func (a *Authenticator) identity(all map[string]any) (Identity, error) {
	name := a.opts.UserClaim
	v, ok := all[name]
	user, isString := v.(string)
	switch {
	case !ok:
		return Identity{}, fmt.Errorf("%w: token has no %q claim", ErrUnauthenticated, name)
	case !isString:
		return Identity{}, fmt.Errorf("%w: the token's %q claim is %s, not a string", ErrUnauthenticated, name, withArticle(jsonType(v)))
	case user == "":
		return Identity{}, fmt.Errorf("%w: the token's %q claim is empty", ErrUnauthenticated, name)
	}
	if err := bounds.Printable(fmt.Sprintf("the token's %q claim", name), user, bounds.User); err != nil {
		return Identity{}, fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	id := Identity{User: user}
	if p := a.opts.ProfileClaim; p != "" {
		if v, ok := all[p]; ok {
			id.Claim, _ = v.(string)
			id.ClaimType = jsonType(v)
		}
	}
	return id, nil
}

// jsonType names the JSON type of a decoded claim value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "number"
}

// withArticle is a JSON type name with its indefinite article.
func withArticle(typ string) string {
	switch typ {
	case "array", "object":
		return "an " + typ
	case "null":
		return typ
	}
	return "a " + typ
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
		return std, nil, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	var all map[string]any
	if err := tok.Claims(key, &std, &all); err != nil {
		return std, nil, fmt.Errorf("%w: bad signature", ErrUnauthenticated)
	}
	return std, all, nil
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
