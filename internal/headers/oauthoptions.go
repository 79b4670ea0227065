package headers

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// defaultRefreshSkew is how long before it expires a token is refreshed
// when OAuthOptions.RefreshSkew is 0.
const defaultRefreshSkew = 60 * time.Second

// check validates o and fills in the defaults of its grant type, auth style
// and default token type. Its errors name fields, never a value.
func (o *OAuthOptions) check() error {
	grant, err := grantType(o.GrantType)
	if err != nil {
		return err
	}
	o.GrantType = grant
	if err := o.checkCredentials(); err != nil {
		return err
	}
	if err := o.checkURLs(); err != nil {
		return err
	}
	if o.AuthStyle, err = authStyleName(o.AuthStyle); err != nil {
		return err
	}
	if o.DefaultTokenType == "" {
		o.DefaultTokenType = "Bearer"
	}
	return nil
}

// grantType returns the grant type g names, GrantClientCredentials for "".
func grantType(g string) (string, error) {
	switch g {
	case "":
		return GrantClientCredentials, nil
	case GrantClientCredentials, GrantRefreshToken:
		return g, nil
	}
	return "", fmt.Errorf("OAuth grant_type must be '%s' or '%s'", GrantClientCredentials, GrantRefreshToken)
}

// checkCredentials checks that the credentials o's grant type needs are set.
func (o *OAuthOptions) checkCredentials() error {
	if o.GrantType == GrantClientCredentials && (o.ClientID == "" || o.ClientSecret == "") {
		return errors.New("OAuth client_credentials requires client_id and client_secret")
	}
	if o.GrantType == GrantRefreshToken && o.RefreshToken == "" {
		return errors.New("OAuth refresh_token grant requires refresh_token")
	}
	return nil
}

// checkURLs checks that there is a token URL or a resource URL to discover
// it from, and that each one set is an http(s) URL.
func (o *OAuthOptions) checkURLs() error {
	if o.TokenURL == "" && o.ResourceURL == "" {
		return errors.New("OAuth needs token_url, or the server URL to discover it from")
	}
	for _, u := range []string{o.TokenURL, o.ResourceURL} {
		if err := checkHTTPURL(u); err != nil {
			return err
		}
	}
	return nil
}

// checkHTTPURL checks that u, unless empty, is an absolute http(s) URL.
func checkHTTPURL(u string) error {
	if u == "" {
		return nil
	}
	if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("OAuth: %q is not an http(s) URL", secret.RedactURL(u))
	}
	return nil
}

// authStyleName returns the auth style s names, AuthStyleAuto for "".
func authStyleName(s string) (string, error) {
	switch s {
	case "":
		return AuthStyleAuto, nil
	case AuthStyleAuto, AuthStyleBasic, AuthStylePost:
		return s, nil
	}
	return "", fmt.Errorf("OAuth auth_style must be '%s', '%s' or '%s'", AuthStyleAuto, AuthStyleBasic, AuthStylePost)
}

// refreshSkew returns the skew OAuthOptions.RefreshSkew d asks for: the
// default for 0, none for a negative d.
func refreshSkew(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return defaultRefreshSkew
	case d < 0:
		return 0
	}
	return d
}

// reservedParams are the token request fields extra_token_params cannot
// override.
var reservedParams = []string{"grant_type", "client_id", "client_secret", "refresh_token", "scope", "audience"}

// unreservedParams returns a copy of extra without the reserved fields,
// logging a warning for each one dropped.
func unreservedParams(server string, extra map[string]string, log hclog.Logger) map[string]string {
	out := make(map[string]string, len(extra))
	for _, k := range sortedKeys(extra) {
		if isReserved(k) {
			log.Warn("ignoring a reserved field in extra_token_params", "server", server, "field", k)
			continue
		}
		out[k] = extra[k]
	}
	return out
}

// isReserved reports whether k names a reserved token request field, in
// any case.
func isReserved(k string) bool {
	for _, r := range reservedParams {
		if strings.EqualFold(k, r) {
			return true
		}
	}
	return false
}
