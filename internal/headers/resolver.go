package headers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/headercheck"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// On-missing policies of user_auth and headers_from_context.
const (
	OnMissingDeny        = "deny"        // fail the call (the default)
	OnMissingPassthrough = "passthrough" // send whatever headers the call already has
)

// defaultUser is the id DeerFlow resolves an anonymous caller to.
const defaultUser = "default"

// Options configure a Resolver. The Resolver keeps its own copies of the maps.
type Options struct {
	Server      string            // server name, used in messages
	Static      map[string]string // static `headers`, original spellings
	OAuth       *OAuthOptions     // nil = none
	UserAuth    *UserAuthOptions  // nil = none (pass nil for stdio servers)
	FromContext *FromContextOptions
	// TokenExchange exchanges the caller's inbound token for the upstream
	// one (RFC 8693); nil = none. Its header is set after OAuth, before
	// user_auth.
	TokenExchange *ExchangeOptions
	// HTTPClient makes the token, probe and metadata requests; nil = a client
	// with a 15 s timeout over http.DefaultTransport. Its Transport should be
	// nil or an *http.Transport for metadata discovery to keep go-sdk's
	// SSRF guard (see oauthex).
	HTTPClient *http.Client
	Logger     hclog.Logger // never given header values, tokens or secrets
}

// UserAuthOptions is DeerFlow's user_auth block: per-user credentials.
type UserAuthOptions struct {
	Header    string            // header to set; "" = Authorization
	Users     map[string]string // user id → full header value
	OnMissing string            // OnMissingDeny ("" too) or OnMissingPassthrough
}

// FromContextOptions is DeerFlow's headers_from_context block: headers taken
// from the request's secrets carrier.
type FromContextOptions struct {
	Headers   map[string]string // header name → key in the secrets carrier
	OnMissing string            // OnMissingDeny ("" too) or OnMissingPassthrough
	// Carrier is the inbound request header the secrets arrive in
	// (inbound.secrets_header), named in denials; "" = X-Mux-Secrets.
	Carrier string
}

// DenyError is a call refused because of its credentials. Msg is safe to show
// to the caller: it names users, servers, keys and reasons, never a value.
type DenyError struct{ Msg string }

// Error implements error.
func (e *DenyError) Error() string { return e.Msg }

// Resolver computes the upstream headers of one server. It is safe for
// concurrent use. The http.Header values it returns are fresh maps whose keys
// are the spellings to put on the wire; copy them with Apply (or by direct
// map assignment), not with Header.Set, which would canonicalize them.
type Resolver struct {
	server   string
	static   []field // sorted by name
	oauth    *tokenSource
	exchange *exchanger
	userAuth *userAuth
	fromCtx  *fromContext
}

// field is one header; the value is a secret.Value so that a stray %v of a
// Resolver prints no credential.
type field struct {
	name  string
	value secret.Value
}

// userAuth is a checked user_auth block.
type userAuth struct {
	header string
	users  map[string]secret.Value
	deny   bool
}

// fromContext is a checked headers_from_context block.
type fromContext struct {
	mappings []mapping // sorted by header name
	deny     bool
	carrier  string // the inbound header of the secrets, for messages
}

// mapping sends the secret under key as the header named header.
type mapping struct{ header, key string }

// New checks opts and builds a Resolver. It does no I/O. Its errors name the
// server and the offending header or field, never a value.
func New(opts Options) (*Resolver, error) {
	r, err := build(opts)
	if err != nil {
		return nil, fmt.Errorf("MCP server '%s': %w", opts.Server, err)
	}
	return r, nil
}

// build is New without the server name on its errors: it checks each block
// of opts and builds its part of the Resolver.
func build(opts Options) (*Resolver, error) {
	static, err := staticFields(opts.Static)
	if err != nil {
		return nil, err
	}
	r := &Resolver{server: opts.Server, static: static}
	if r.userAuth, err = newUserAuth(opts.UserAuth); err != nil {
		return nil, err
	}
	if r.fromCtx, err = newFromContext(opts.FromContext); err != nil {
		return nil, err
	}
	if r.oauth, err = newOAuth(opts, static); err != nil {
		return nil, err
	}
	if opts.TokenExchange != nil {
		client, log := clientAndLogger(opts)
		if r.exchange, err = newExchanger(opts.Server, *opts.TokenExchange, client, log); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// spellings maps the lower-case form of each header name seen to its first
// spelling, to refuse one header set under two spellings.
type spellings map[string]string

// add records name and returns the spelling seen first when the header was
// already there.
func (s spellings) add(name string) (first string, dup bool) {
	lower := strings.ToLower(name)
	if first, dup = s[lower]; dup {
		return first, true
	}
	s[lower] = name
	return "", false
}

// staticFields checks the static headers and returns them sorted by name.
func staticFields(static map[string]string) ([]field, error) {
	names := sortedKeys(static)
	seen := make(spellings, len(names))
	var fields []field
	for _, name := range names {
		if err := headercheck.CheckName(name); err != nil {
			return nil, fmt.Errorf("headers: %q: %v", name, err)
		}
		if first, dup := seen.add(name); dup {
			return nil, fmt.Errorf("headers sets the same HTTP header under two spellings (%q and %q); header names are case-insensitive, so keep only one", first, name)
		}
		if err := headercheck.CheckValue(static[name]); err != nil {
			return nil, fmt.Errorf("the value of header %q %v, so it cannot be sent as an HTTP header", name, err)
		}
		fields = append(fields, field{name, secret.Value(static[name])})
	}
	return fields, nil
}

// newUserAuth checks the user_auth block ua and builds its part of a
// Resolver; nil for none.
func newUserAuth(ua *UserAuthOptions) (*userAuth, error) {
	if ua == nil {
		return nil, nil
	}
	header := cmp.Or(ua.Header, "Authorization")
	if err := headercheck.CheckName(header); err != nil {
		return nil, fmt.Errorf("user_auth.header: %v", err)
	}
	deny, err := onMissing(ua.OnMissing)
	if err != nil {
		return nil, fmt.Errorf("user_auth.%v", err)
	}
	users := make(map[string]secret.Value, len(ua.Users))
	for id, v := range ua.Users {
		users[id] = secret.Value(v)
	}
	return &userAuth{header: header, users: users, deny: deny}, nil
}

// newFromContext checks the headers_from_context block fc and builds its
// part of a Resolver; nil for none, or for a block that maps no header.
func newFromContext(fc *FromContextOptions) (*fromContext, error) {
	if fc == nil || len(fc.Headers) == 0 {
		return nil, nil
	}
	deny, err := onMissing(fc.OnMissing)
	if err != nil {
		return nil, fmt.Errorf("headers_from_context.%v", err)
	}
	m := &fromContext{deny: deny, carrier: fc.Carrier}
	if m.carrier == "" {
		m.carrier = "X-Mux-Secrets"
	}
	seen := make(spellings, len(fc.Headers))
	for _, name := range sortedKeys(fc.Headers) {
		if err := checkMapping(name, fc.Headers[name], seen); err != nil {
			return nil, err
		}
		m.mappings = append(m.mappings, mapping{name, fc.Headers[name]})
	}
	return m, nil
}

// checkMapping checks one headers_from_context mapping of header name to
// secrets key, seen holding the header names mapped before it.
func checkMapping(name, key string, seen spellings) error {
	if strings.TrimSpace(name) == "" {
		return errors.New("headers_from_context.headers must not contain a blank header name")
	}
	if err := headercheck.CheckName(name); err != nil {
		return fmt.Errorf("headers_from_context.headers: %q: %v", name, err)
	}
	if first, dup := seen.add(name); dup {
		return fmt.Errorf("headers_from_context.headers maps the same HTTP header under two spellings ('%s' and '%s'); header names are case-insensitive, so keep only one", first, name)
	}
	if strings.TrimSpace(key) == "" {
		return fmt.Errorf("headers_from_context.headers['%s'] must name a non-blank key of the request's secrets (the inbound.secrets_header object)", name)
	}
	return nil
}

// newOAuth builds the token source of opts.OAuth, nil for none; static are
// the static headers its discovery probe carries.
func newOAuth(opts Options, static []field) (*tokenSource, error) {
	if opts.OAuth == nil {
		return nil, nil
	}
	client, log := clientAndLogger(opts)
	return newTokenSource(opts.Server, *opts.OAuth, static, client, log)
}

// clientAndLogger returns opts' token HTTP client and logger, or their defaults.
func clientAndLogger(opts Options) (*http.Client, hclog.Logger) {
	client := opts.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: tokenTimeout}
	}
	log := opts.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	return client, log
}

// onMissing reports whether the on_missing policy v denies a call.
func onMissing(v string) (deny bool, err error) {
	switch v {
	case "", OnMissingDeny:
		return true, nil
	case OnMissingPassthrough:
		return false, nil
	}
	return false, fmt.Errorf("on_missing must be '%s' or '%s'", OnMissingDeny, OnMissingPassthrough)
}

// PerCaller reports whether ForCall depends on the caller (token_exchange,
// user_auth or headers_from_context is configured). Sessions opened with
// such headers must never be shared across users.
func (r *Resolver) PerCaller() bool {
	return r.exchange != nil || r.userAuth != nil || r.fromCtx != nil
}

// Base returns the headers of requests that have no caller (discovery,
// control sessions): static < OAuth. When the OAuth token cannot be had, it
// returns the static headers together with the error, so the caller can
// decide to proceed without the token.
func (r *Resolver) Base(ctx context.Context) (http.Header, error) {
	s := r.start()
	if err := r.addOAuth(ctx, s); err != nil {
		return r.start().header(), err
	}
	return s.header(), nil
}

// ForCall returns the headers of one call by user (an empty user is DeerFlow's
// "default") carrying the request's secrets: static < OAuth < user_auth <
// headers_from_context. Header names match case-insensitively; the emitted
// spelling is the static one, else the first override's, and only one
// spelling is ever returned. A refusal is a *DenyError with DeerFlow's
// message; an OAuth failure is returned as is.
func (r *Resolver) ForCall(ctx context.Context, user string, secrets map[string]string) (http.Header, error) {
	return r.ForRequest(ctx, user, secrets, nil)
}

// ForRequest is ForCall for a request whose inbound headers are in, where
// token_exchange finds the caller's token: static < OAuth < token_exchange <
// user_auth < headers_from_context. A failed exchange is a *DenyError.
func (r *Resolver) ForRequest(ctx context.Context, user string, secrets map[string]string, in http.Header) (http.Header, error) {
	s := r.start()
	if err := r.addOAuth(ctx, s); err != nil {
		return nil, err
	}
	if err := r.addExchange(ctx, s, user, in); err != nil {
		return nil, err
	}
	if err := r.addUserAuth(s, user); err != nil {
		return nil, err
	}
	if err := r.addFromContext(s, secrets); err != nil {
		return nil, err
	}
	return s.header(), nil
}

// Unauthorized tells the Resolver that the upstream answered 401 to a request
// that carried token, which may be the Authorization value ("Bearer x") or the
// bare access token. If that is the current OAuth token, the next Base or
// ForCall fetches a new one; a token that is no longer current is ignored, so
// concurrent callers reporting the same stale token cause one refresh.
func (r *Resolver) Unauthorized(token string) {
	if r.oauth != nil && token != "" {
		r.oauth.invalidate(token)
	}
	if r.exchange != nil && token != "" {
		r.exchange.invalidate(token)
	}
}

// UnauthorizedHeader is Unauthorized for the headers a refused request
// carried: it looks up Authorization, and token_exchange's header, in any
// spelling.
func (r *Resolver) UnauthorizedHeader(sent http.Header) {
	for k, v := range sent {
		if len(v) > 0 && (strings.EqualFold(k, "Authorization") || r.exchange != nil && strings.EqualFold(k, r.exchange.opts.Header)) {
			r.Unauthorized(v[0])
		}
	}
}

// Close stops an OAuth fetch or token exchange in flight; later calls
// needing a token fail.
func (r *Resolver) Close() {
	if r.oauth != nil {
		r.oauth.close()
	}
	if r.exchange != nil {
		r.exchange.close()
	}
}

// Apply copies src into dst, replacing every other spelling of each header
// so that one spelling goes on the wire. dst's keys are used verbatim.
func Apply(dst, src http.Header) {
	for k, v := range src {
		for dk := range dst {
			if dk != k && strings.EqualFold(dk, k) {
				delete(dst, dk)
			}
		}
		dst[k] = slices.Clone(v)
	}
}

// addOAuth sets Authorization to the current OAuth token, fetching one
// when needed.
func (r *Resolver) addOAuth(ctx context.Context, s *headerSet) error {
	if r.oauth == nil {
		return nil
	}
	t, err := r.oauth.token(ctx)
	if err != nil {
		return err
	}
	s.set("Authorization", t.value)
	return nil
}

// addExchange sets the token_exchange header to user's exchanged token,
// the caller's token taken from the inbound headers in.
func (r *Resolver) addExchange(ctx context.Context, s *headerSet, user string, in http.Header) error {
	if r.exchange == nil {
		return nil
	}
	v, err := r.exchange.value(ctx, user, in)
	if err != nil {
		return err
	}
	s.set(r.exchange.opts.Header, v)
	return nil
}

// addUserAuth sets the user_auth header to the credential of user (the
// default user for ""), refusing the call when there is none and
// on_missing denies, or when it cannot be a header value.
func (r *Resolver) addUserAuth(s *headerSet, user string) error {
	ua := r.userAuth
	if ua == nil {
		return nil
	}
	if user == "" {
		user = defaultUser
	}
	cred := ua.users[user]
	if cred.IsZero() {
		if !ua.deny {
			return nil
		}
		return &DenyError{Msg: fmt.Sprintf("No credential is configured for your account (user id '%s') on MCP server '%s'. "+
			"Ask the operator to add this exact id to that server's user_auth.users map (or set its environment variable).",
			user, r.server)}
	}
	if err := headercheck.CheckValue(cred.Reveal()); err != nil {
		return &DenyError{Msg: fmt.Sprintf("The credential configured for your account (user id '%s') on MCP server '%s' %v, "+
			"so it cannot be sent as an HTTP header. Ask the operator to fix that server's user_auth.users entry; "+
			"a stray newline in the value or its environment variable is the usual cause.",
			user, r.server, err)}
	}
	s.set(ua.header, cred)
	return nil
}

// addFromContext sets the headers_from_context headers from the request's
// secrets. A value that cannot be a header value is refused; missing ones
// are refused unless on_missing is passthrough.
func (r *Resolver) addFromContext(s *headerSet, secrets map[string]string) error {
	fc := r.fromCtx
	if fc == nil {
		return nil
	}
	res := fc.resolve(secrets)
	if len(res.illegal) > 0 {
		return r.illegalSecrets(res.illegal)
	}
	if len(res.missing) > 0 && fc.deny {
		return &DenyError{Msg: fmt.Sprintf("MCP server '%s' needs request-scoped credential(s) %s. "+
			"Send them in the %s request header (a JSON object of key → value), or set this server's headers_from_context.on_missing to 'passthrough'.",
			r.server, strings.Join(sortedUnique(res.missing), ", "), fc.carrier)}
	}
	for _, f := range res.fields {
		s.set(f.name, f.value)
	}
	return nil
}

// resolvedSecrets is what a request's secrets give for the mappings of a
// headers_from_context block.
type resolvedSecrets struct {
	fields  []field
	missing []string          // keys the secrets lack (or hold empty)
	illegal map[string]string // key → why its value cannot be a header value
}

// resolve looks up the secret of each mapping.
func (fc *fromContext) resolve(secrets map[string]string) resolvedSecrets {
	var res resolvedSecrets
	for _, m := range fc.mappings {
		v := secrets[m.key]
		if v == "" {
			res.missing = append(res.missing, m.key)
			continue
		}
		if err := headercheck.CheckValue(v); err != nil {
			res.illegal = setReason(res.illegal, m.key, err.Error())
			continue
		}
		res.fields = append(res.fields, field{m.header, secret.Value(v)})
	}
	return res
}

// setReason records why the value of key was refused, making the map on
// first use.
func setReason(reasons map[string]string, key, why string) map[string]string {
	if reasons == nil {
		reasons = map[string]string{}
	}
	reasons[key] = why
	return reasons
}

// illegalSecrets is the refusal of request-scoped secrets (key → reason)
// that cannot be sent as header values; it names keys, never values.
func (r *Resolver) illegalSecrets(illegal map[string]string) error {
	keys := sortedKeys(illegal)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("'%s' %s", k, illegal[k])
	}
	return &DenyError{Msg: fmt.Sprintf("MCP server '%s' cannot send request-scoped credential(s) as HTTP header values: %s. "+
		"Fix the value passed in the %s request header; a stray newline picked up when reading a token from a file is the usual cause.",
		r.server, strings.Join(parts, "; "), r.fromCtx.carrier)}
}

// start returns a headerSet holding the static headers.
func (r *Resolver) start() *headerSet {
	s := &headerSet{byLower: make(map[string]int, len(r.static)+2)}
	for _, f := range r.static {
		s.set(f.name, f.value)
	}
	return s
}

// headerSet is an ordered, case-insensitive header map that keeps the first
// spelling it saw for each name.
type headerSet struct {
	fields  []field
	byLower map[string]int
}

// set sets the header name, keeping the spelling seen first.
func (s *headerSet) set(name string, value secret.Value) {
	lower := strings.ToLower(name)
	if i, ok := s.byLower[lower]; ok {
		s.fields[i].value = value
		return
	}
	s.byLower[lower] = len(s.fields)
	s.fields = append(s.fields, field{name, value})
}

// header returns the set as a fresh http.Header, values revealed.
func (s *headerSet) header() http.Header {
	h := make(http.Header, len(s.fields))
	for _, f := range s.fields {
		h[f.name] = []string{f.value.Reveal()}
	}
	return h
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// sortedUnique sorts s and drops repeats, in place.
func sortedUnique(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// tokenTimeout bounds one token request (DeerFlow's httpx timeout) and, separately, discovery.
const tokenTimeout = 15 * time.Second

// String and GoString keep fmt from printing the unexported fields, which
// hold credentials that secret.Value cannot redact there.
func (r *Resolver) String() string { return fmt.Sprintf("headers.Resolver(%q)", r.server) }

// GoString implements fmt.GoStringer; see String.
func (r *Resolver) GoString() string { return r.String() }
