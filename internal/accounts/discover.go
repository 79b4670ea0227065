package accounts

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// discovered is what a consent learns about a server's authorization.
type discovered struct {
	resource        string
	issuer          string
	issSupported    bool
	authURL         string
	tokenURL        string
	registerURL     string
	cimd            bool     // the AS supports Client ID Metadata Documents
	authMethods     []string // token_endpoint_auth_methods_supported
	challengeScope  string
	scopesSupported []string // the resource metadata's
	offlineAccess   bool     // the AS lists offline_access
}

// discover reads the challenges (probing the server when there are
// none), the protected resource metadata and the authorization server's
// metadata, as the MCP authorization spec says.
func (m *Manager) discover(ctx context.Context, sc ServerConfig, www []string) (*discovered, error) {
	// A malformed header leaves only the well-known URLs to try.
	challenges, _ := oauthex.ParseWWWAuthenticate(www)
	if www == nil {
		req, err := headers.NewProbe(ctx, sc.URL)
		if err != nil {
			return nil, fmt.Errorf("probing %s: %w", secret.RedactURL(sc.URL), err)
		}
		if challenges, err = headers.Probe(m.direct, req); err != nil {
			return nil, err
		}
	}
	prm, err := m.resourceMetadata(ctx, challenges, sc.URL)
	if err != nil {
		return nil, err
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, errors.New("the protected resource metadata names no authorization server")
	}
	d := &discovered{resource: prm.Resource, issuer: prm.AuthorizationServers[0], scopesSupported: prm.ScopesSupported,
		challengeScope: headers.ChallengeScope(challenges)}
	asm, err := auth.GetAuthServerMetadata(ctx, d.issuer, m.hc)
	if err != nil {
		return nil, fmt.Errorf("authorization server metadata of %s: %w", secret.RedactURL(d.issuer), err)
	}
	if asm == nil { // 2025-03-26: default endpoints under the issuer
		base := strings.TrimSuffix(d.issuer, "/")
		d.authURL, d.tokenURL, d.registerURL = base+"/authorize", base+"/token", base+"/register"
	} else {
		d.issuer, d.issSupported, d.cimd = asm.Issuer, asm.AuthorizationResponseIssParameterSupported, asm.ClientIDMetadataDocumentSupported
		d.authURL, d.tokenURL, d.registerURL = asm.AuthorizationEndpoint, asm.TokenEndpoint, asm.RegistrationEndpoint
		d.authMethods = asm.TokenEndpointAuthMethodsSupported
		d.offlineAccess = slices.Contains(asm.ScopesSupported, "offline_access")
	}
	if sc.AuthorizationURL != "" {
		d.authURL = sc.AuthorizationURL
	}
	if sc.TokenURL != "" {
		d.tokenURL = sc.TokenURL
	}
	if d.authURL == "" || d.tokenURL == "" {
		return nil, errors.New("the authorization server metadata has no authorization or token endpoint")
	}
	return d, nil
}

// resourceMetadata fetches the protected resource metadata from the
// challenge's URL, else the path-based and root well-known URLs. A
// document that is found but unusable (its resource differs) is an
// error; only when none is found is the server's origin its own
// authorization server (2025-03-26).
func (m *Manager) resourceMetadata(ctx context.Context, challenges []oauthex.Challenge, resourceURL string) (*oauthex.ProtectedResourceMetadata, error) {
	named := headers.ChallengeParam(challenges, "resource_metadata")
	for _, c := range headers.PRMCandidates(named, resourceURL) {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.URL, c.Resource, m.hc)
		if err == nil && prm != nil {
			return prm, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil && !strings.Contains(err.Error(), "bad status") {
			return nil, fmt.Errorf("protected resource metadata: %w", err)
		}
	}
	if named != "" {
		return nil, errors.New("the protected resource metadata the server names is not there")
	}
	u, err := url.Parse(resourceURL)
	if err != nil {
		return nil, fmt.Errorf("the server URL: %w", err)
	}
	return &oauthex.ProtectedResourceMetadata{
		Resource:             resourceURL,
		AuthorizationServers: []string{(&url.URL{Scheme: u.Scheme, Host: u.Host}).String()},
	}, nil
}

// register returns the client to use at the authorization server:
// pre-registered, a Client ID Metadata Document, or one registered
// dynamically (kept per server, issuer and redirect URI, so a server that
// moved to another issuer never gets the old issuer's client).
func (m *Manager) register(ctx context.Context, sc ServerConfig, d *discovered) (client, error) {
	switch {
	case sc.ClientID != "":
		return client{Kind: "pre", ID: sc.ClientID, Secret: sc.ClientSecret.Reveal(), Style: preStyle(sc.ClientSecret.IsZero(), d.authMethods)}, nil
	case d.cimd && (sc.ClientMetadataURL != "" || m.cimd != ""):
		id := sc.ClientMetadataURL
		if id == "" {
			id = m.cimd
		}
		return client{Kind: "cimd", ID: id, Style: oauth2.AuthStyleInParams}, nil
	case d.registerURL != "":
		return m.dynamic(ctx, sc, d)
	}
	return client{}, errors.New("the authorization server supports no registration method mcp-mux can use (configure a client_id)")
}

// preStyle is how a pre-registered client authenticates: Basic unless the
// server lists only client_secret_post (or the client has no secret).
func preStyle(noSecret bool, methods []string) oauth2.AuthStyle {
	switch {
	case noSecret:
		return oauth2.AuthStyleInParams
	case len(methods) == 0 || slices.Contains(methods, "client_secret_basic"):
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// regKey is the store key of a dynamic registration.
func regKey(server, issuer, redirect string) string {
	sum := sha256.Sum256([]byte(server + "\x00" + issuer + "\x00" + redirect))
	return hex.EncodeToString(sum[:16])
}

// dynamic returns the stored registration at d's issuer, registering
// (RFC 7591) when there is none.
func (m *Manager) dynamic(ctx context.Context, sc ServerConfig, d *discovered) (client, error) {
	key := regKey(sc.Name, d.issuer, m.redirect)
	if b, err := m.store.getReg(ctx, key); err != nil {
		return client{}, err
	} else if b != nil {
		var c client
		if openJSON(m.regs, key, b, &c) == nil {
			return c, nil
		}
		m.log.Warn("a stored client registration does not open; registering again", "server", sc.Name)
	}
	method := "none"
	if slices.Contains(d.authMethods, "client_secret_basic") {
		method = "client_secret_basic"
	} else if slices.Contains(d.authMethods, "client_secret_post") {
		method = "client_secret_post"
	}
	resp, err := oauthex.RegisterClient(ctx, d.registerURL, &oauthex.ClientRegistrationMetadata{
		RedirectURIs: []string{m.redirect}, GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, ClientName: "mcp-mux", ApplicationType: "web", TokenEndpointAuthMethod: method,
	}, m.direct)
	if err != nil {
		return client{}, registrationError(d.registerURL, err)
	}
	c := client{Kind: "dcr", ID: resp.ClientID, Secret: resp.ClientSecret, Style: methodStyle(resp.TokenEndpointAuthMethod, resp.ClientSecret != "")}
	if len(c.ID) > maxTokenLen || len(c.Secret) > maxTokenLen {
		return client{}, errors.New("the registration answered a client id or secret too long to keep")
	}
	b, err := sealJSON(m.regs, key, c)
	if err == nil {
		err = m.store.putReg(ctx, key, b)
	}
	if err != nil {
		return client{}, fmt.Errorf("keeping the client registration: %w", err)
	}
	return c, nil
}

// methodStyle maps a registered token_endpoint_auth_method to x/oauth2's
// style (never AutoDetect); without one, Basic when a secret came back.
func methodStyle(method string, hasSecret bool) oauth2.AuthStyle {
	switch method {
	case "client_secret_basic":
		return oauth2.AuthStyleInHeader
	case "client_secret_post", "none":
		return oauth2.AuthStyleInParams
	}
	if hasSecret {
		return oauth2.AuthStyleInHeader
	}
	return oauth2.AuthStyleInParams
}

// registrationError names a failed registration without its response,
// which RegisterClient quotes and which may hold a client secret.
func registrationError(endpoint string, err error) error {
	var re *oauthex.ClientRegistrationError
	msg := "dynamic client registration at " + secret.RedactURL(endpoint) + " failed"
	switch {
	case errors.As(err, &re):
		if code := headers.SafeErrorCode(re.ErrorCode); code != "" {
			msg += ": " + code
		}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		msg += ": timed out"
	}
	return errors.New(msg)
}
