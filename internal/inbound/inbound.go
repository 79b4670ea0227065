// Package inbound establishes who is calling mcp-mux.
//
// An Authenticator checks each HTTP request according to the configured
// mode — none, trusted_header, api_keys or jwt — and yields the caller's user
// id, which scopes upstream sessions and per-user credentials. A request that
// fails gets 401 with a WWW-Authenticate challenge; it never reaches the MCP
// handler. Credentials are compared in constant time and never logged.
package inbound

import (
	"cmp"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
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
	// ProfileClaim names the JWT claim whose string value names the
	// caller's profile (Identity.Claim); "" reads none.
	ProfileClaim string
	// ResourceURL is the public URL of the /mcp endpoint, announced in the
	// protected-resource metadata (jwt). Empty: derived from each request.
	ResourceURL string
	// HTTPClient makes the JWKS fetches (nil = a client with a 10 s
	// timeout); they follow no redirect, whatever its CheckRedirect.
	HTTPClient *http.Client
	Logger     hclog.Logger
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

// apiKey is one api_keys entry.
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
	if err := a.configure(); err != nil {
		return nil, err
	}
	return a, nil
}

// configure checks the settings of the configured mode and builds what
// that mode authenticates with.
func (a *Authenticator) configure() error {
	switch a.opts.Mode {
	case "", ModeNone:
		a.opts.Mode = ModeNone
		return nil
	case ModeTrustedHeader:
		if a.opts.UserHeader == "" {
			return errors.New("trusted_header mode needs a user header")
		}
		return nil
	case ModeAPIKeys:
		keys, err := apiKeys(a.opts.Keys)
		a.keys = keys
		return err
	case ModeJWT:
		return a.configureJWT()
	}
	return fmt.Errorf("unknown auth mode %q", a.opts.Mode)
}

// apiKeys returns the keys of api_keys mode (user id → key); every key
// must be non-empty, and there must be one.
func apiKeys(keys map[string]string) ([]apiKey, error) {
	var out []apiKey
	for user, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("api key for user %q is empty", user)
		}
		out = append(out, apiKey{user: user, key: []byte(k)})
	}
	if len(out) == 0 {
		return nil, errors.New("api_keys mode needs at least one key")
	}
	return out, nil
}

// configureJWT checks the settings of jwt mode, defaults the user claim to
// "sub" and sets up the JWKS cache.
func (a *Authenticator) configureJWT() error {
	o := &a.opts
	if o.JWKSURL == "" || o.Issuer == "" || o.Audience == "" {
		return errors.New("jwt mode needs jwks_url, issuer and audience")
	}
	o.UserClaim = cmp.Or(o.UserClaim, "sub")
	a.jwks = newKeyCache(o.JWKSURL, noRedirects(o.HTTPClient), o.Now, a.log)
	return nil
}

// noRedirects returns a copy of c (nil: a client with fetchTimeout) that
// follows no redirect: a JWKS URL that answers with one is an error, so
// the key set comes from the configured URL or from nowhere.
func noRedirects(c *http.Client) *http.Client {
	out := &http.Client{Timeout: fetchTimeout}
	if c != nil {
		out.Transport, out.Jar, out.Timeout = c.Transport, c.Jar, c.Timeout
	}
	out.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		status := 0
		if req.Response != nil {
			status = req.Response.StatusCode
		}
		return fmt.Errorf("it answered HTTP %d, a redirect, and mcp-mux follows no redirect on a credential request", status)
	}
	return out
}

// Mode returns the configured mode.
func (a *Authenticator) Mode() string { return a.opts.Mode }

// Identity is who a request's caller is.
type Identity struct {
	// User is the caller's user id; one the caller sends (trusted
	// header, JWT claim) is printable and at most bounds.User bytes.
	User string
	// Claim is the value of the ProfileClaim of its JWT when that is a
	// string. ClaimType is the claim's JSON type — "" when the token has
	// none, else "string", "number", "boolean", "array", "object" or
	// "null" — so that profile selection refuses a claim it cannot read
	// instead of taking it for no claim.
	Claim, ClaimType string
}

// Authenticate returns the user id of r's caller.
func (a *Authenticator) Authenticate(r *http.Request) (string, error) {
	id, err := a.Identify(r)
	return id.User, err
}

// Identify returns r's caller.
func (a *Authenticator) Identify(r *http.Request) (Identity, error) {
	var user string
	var err error
	switch a.opts.Mode {
	case ModeTrustedHeader:
		user, err = a.headerUser(r)
	case ModeAPIKeys:
		user, err = a.apiKeyUser(r)
	case ModeJWT:
		return a.jwtUser(r)
	default:
		user = DefaultUser
	}
	return Identity{User: user}, err
}

// headerUser returns the user the trusted header names: sent once, at
// most bounds.User bytes of printable text.
func (a *Authenticator) headerUser(r *http.Request) (string, error) {
	name := a.opts.UserHeader
	vs := r.Header.Values(name)
	if len(vs) > 1 {
		return "", fmt.Errorf("%w: the %s header is sent %d times; send it once", ErrUnauthenticated, name, len(vs))
	}
	u := ""
	if len(vs) == 1 {
		u = strings.Trim(vs[0], " \t") // HTTP's optional whitespace
	}
	if u == "" {
		return "", fmt.Errorf("%w: missing %s header", ErrUnauthenticated, name)
	}
	if err := bounds.Printable(name, u, bounds.User); err != nil {
		return "", fmt.Errorf("%w: %v", ErrUnauthenticated, err)
	}
	return u, nil
}

// apiKeyUser returns the user whose api key is r's bearer token.
func (a *Authenticator) apiKeyUser(r *http.Request) (string, error) {
	tok, ok := bearer(r)
	if !ok {
		return "", fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	}
	user := a.keyUser(tok)
	if user == "" {
		return "", fmt.Errorf("%w: unknown api key", ErrUnauthenticated)
	}
	return user, nil
}

// keyUser returns the user whose key is tok, or "". It compares tok with
// every key, so timing does not reveal which one matched.
func (a *Authenticator) keyUser(tok string) string {
	user := ""
	for _, k := range a.keys {
		if subtle.ConstantTimeCompare([]byte(tok), k.key) == 1 {
			user = k.user
		}
	}
	return user
}

// jwtUser returns the caller of the JWT r carries as its bearer token.
func (a *Authenticator) jwtUser(r *http.Request) (Identity, error) {
	tok, ok := bearer(r)
	if !ok {
		return Identity{}, fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	}
	return a.verifyJWT(r.Context(), tok)
}

// bearer returns r's bearer token, if it has one.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// scheme returns the scheme r came in with.
func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// Challenge writes a 401 with a WWW-Authenticate header for r.
func (a *Authenticator) Challenge(w http.ResponseWriter, r *http.Request, err error) {
	c := `Bearer realm="mcp-mux"`
	if a.opts.Mode == ModeJWT {
		c += fmt.Sprintf(`, error="invalid_token", resource_metadata="%s://%s%s"`, scheme(r), r.Host, MetadataPath)
	}
	w.Header().Set("WWW-Authenticate", c)
	msg := "unauthenticated"
	if err != nil {
		msg = err.Error()
	}
	mcpwire.WriteError(w, http.StatusUnauthorized, nil, -32001, msg, nil)
}
