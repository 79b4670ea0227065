package headers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// endpoint is what token requests need from discovery.
type endpoint struct {
	tokenURL    string
	resource    string   // RFC 8707 resource indicator ("" = do not send one)
	scope       string   // from the 401 challenge or scopes_supported, unless configured
	authMethods []string // token_endpoint_auth_methods_supported
}

// probeID is the id of the probe's JSON-RPC ping: a harmless request for the
// unauthenticated probe, which a protected server answers with 401 before
// looking at it.
const probeID = `"mcp-mux-oauth-discovery"`

// discover finds the token endpoint of the server at ResourceURL the way the
// MCP authorization spec (2025-11-25) says, with go-sdk's oauthex and auth
// helpers doing the metadata requests and their validation.
func (s *tokenSource) discover(ctx context.Context) (endpoint, error) {
	resourceURL := s.opts.ResourceURL
	challenges, err := s.probe(ctx, resourceURL)
	if err != nil {
		return endpoint{}, err
	}

	prm, err := s.resourceMetadata(ctx, challenges, resourceURL)
	if err != nil {
		return endpoint{}, err
	}
	if len(prm.AuthorizationServers) == 0 {
		return endpoint{}, errors.New("the protected resource metadata names no authorization server")
	}
	ep, err := s.authServerEndpoint(ctx, prm.AuthorizationServers[0])
	if err != nil {
		return endpoint{}, err
	}
	ep.resource = prm.Resource
	ep.scope = ChallengeScope(challenges)
	if ep.scope == "" && len(prm.ScopesSupported) > 0 {
		ep.scope = strings.Join(prm.ScopesSupported, " ")
	}
	return ep, nil
}

// authServerEndpoint reads the token endpoint and the client
// authentication methods from the metadata of the authorization server
// issuer, or takes the 2025-03-26 default endpoint when it has none.
func (s *tokenSource) authServerEndpoint(ctx context.Context, issuer string) (endpoint, error) {
	asm, err := auth.GetAuthServerMetadata(ctx, issuer, s.client)
	if err != nil {
		return endpoint{}, fmt.Errorf("authorization server metadata of %s: %w", secret.RedactURL(issuer), err)
	}
	if asm == nil {
		// No metadata at any well-known URL: the 2025-03-26 default endpoint.
		return endpoint{tokenURL: strings.TrimSuffix(issuer, "/") + "/token"}, nil
	}
	if asm.TokenEndpoint == "" {
		return endpoint{}, fmt.Errorf("the authorization server metadata of %s has no token_endpoint", secret.RedactURL(issuer))
	}
	return endpoint{tokenURL: asm.TokenEndpoint, authMethods: asm.TokenEndpointAuthMethodsSupported}, nil
}

// probe sends the unauthenticated request, with the static headers but no
// Authorization, and returns the WWW-Authenticate challenges of a 401.
func (s *tokenSource) probe(ctx context.Context, resourceURL string) ([]oauthex.Challenge, error) {
	req, err := NewProbe(ctx, resourceURL)
	if err != nil {
		return nil, fmt.Errorf("probing %s: %w", secret.RedactURL(resourceURL), err)
	}
	for _, f := range s.static {
		if !strings.EqualFold(f.name, "Authorization") {
			req.Header[f.name] = []string{f.value.Reveal()}
		}
	}
	return Probe(s.client, req)
}

// NewProbe builds the unauthenticated probe of the MCP server at
// resourceURL: a JSON-RPC ping, which a protected server answers with 401
// before looking at it.
func NewProbe(ctx context.Context, resourceURL string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, resourceURL, bytes.NewReader(wire.AppendRequest(nil, json.RawMessage(probeID), "ping", nil)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return req, nil
}

// Probe sends the probe req on client and returns the WWW-Authenticate
// challenges of a 401 answer (none for any other answer, or a malformed
// header: then only the well-known URLs are left to try).
func Probe(client *http.Client, req *http.Request) ([]oauthex.Challenge, error) {
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // url.Error would repeat the full URL
		}
		return nil, fmt.Errorf("probing %s: %w", secret.RedactURL(req.URL.String()), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return nil, nil
	}
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	return challenges, nil
}

// resourceMetadata fetches the protected resource metadata: from the URL the
// challenge names, else the path-based and root well-known URLs. If none
// answers, the server's origin is taken as its authorization server
// (2025-03-26 behaviour), as go-sdk's own clients do.
func (s *tokenSource) resourceMetadata(ctx context.Context, challenges []oauthex.Challenge, resourceURL string) (*oauthex.ProtectedResourceMetadata, error) {
	var errs []error
	for _, c := range PRMCandidates(ChallengeParam(challenges, "resource_metadata"), resourceURL) {
		prm, err := oauthex.GetProtectedResourceMetadata(ctx, c.URL, c.Resource, s.client)
		if err == nil && prm != nil {
			return prm, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			return nil, errors.Join(errs...)
		}
	}
	if ChallengeParam(challenges, "resource_metadata") != "" {
		// The server pointed at metadata that could not be used: say why.
		return nil, fmt.Errorf("protected resource metadata: %w", errors.Join(errs...))
	}
	u, err := url.Parse(resourceURL)
	if err != nil {
		return nil, err
	}
	return &oauthex.ProtectedResourceMetadata{
		Resource:             resourceURL,
		AuthorizationServers: []string{(&url.URL{Scheme: u.Scheme, Host: u.Host}).String()},
	}, nil
}

// PRMCandidate is a URL that may hold protected resource metadata and the
// resource identifier the metadata there must declare.
type PRMCandidate struct{ URL, Resource string }

// PRMCandidates lists where protected resource metadata may be, in the MCP
// spec's order, each with the resource identifier it must declare.
func PRMCandidates(fromChallenge, resourceURL string) []PRMCandidate {
	var out []PRMCandidate
	if fromChallenge != "" {
		out = append(out, PRMCandidate{fromChallenge, resourceURL})
	}
	ru, err := url.Parse(resourceURL)
	if err != nil {
		return out
	}
	if p := strings.Trim(ru.Path, "/"); p != "" {
		out = append(out, PRMCandidate{
			(&url.URL{Scheme: ru.Scheme, Host: ru.Host, Path: "/.well-known/oauth-protected-resource/" + p}).String(),
			resourceURL,
		})
	}
	root := (&url.URL{Scheme: ru.Scheme, Host: ru.Host}).String()
	if strings.Trim(ru.Path, "/") == "" {
		root = resourceURL
	}
	out = append(out, PRMCandidate{
		(&url.URL{Scheme: ru.Scheme, Host: ru.Host, Path: "/.well-known/oauth-protected-resource"}).String(),
		root,
	})
	return out
}

// ChallengeParam returns the first non-empty value of the parameter name
// among the challenges cs, or "".
func ChallengeParam(cs []oauthex.Challenge, name string) string {
	for _, c := range cs {
		if v := c.Params[name]; v != "" {
			return v
		}
	}
	return ""
}

// ChallengeScope is the scope a Bearer challenge asks for.
func ChallengeScope(cs []oauthex.Challenge) string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params["scope"] != "" {
			return c.Params["scope"]
		}
	}
	return ""
}
