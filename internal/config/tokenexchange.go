package config

import (
	"net/url"
	"strings"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config/internal/rawdoc"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// Token types of RFC 8693, the defaults of token_exchange.
const (
	TokenTypeAccess = "urn:ietf:params:oauth:token-type:access_token"
	TokenTypeJWT    = "urn:ietf:params:oauth:token-type:jwt"
)

// TokenExchange is a server's "token_exchange" block: the caller's inbound
// token exchanged at TokenURL (RFC 8693) for the token sent upstream.
type TokenExchange struct {
	Enabled      bool
	TokenURL     string
	ClientID     string
	ClientSecret secret.Value
	// AuthStyle is "auto" (default), "basic" or "post", as in oauth.
	AuthStyle string
	// SubjectHeader is the inbound header holding the caller's token
	// (default "Authorization", a Bearer prefix stripped).
	SubjectHeader    string
	SubjectTokenType string // default TokenTypeAccess
	Audience         string
	Resource         string
	Scope            string
	// RequestedTokenType is default TokenTypeAccess.
	RequestedTokenType string
	ActorToken         secret.Value
	ActorTokenType     string // default TokenTypeAccess
	// Header is the upstream header (default "Authorization"); TokenPrefix
	// goes before the token in it (default "Bearer"; "" for the bare token).
	Header      string
	TokenPrefix string
	// RefreshSkew exchanges again this long before a token expires (default
	// 60s, at most half the token's lifetime).
	RefreshSkew time.Duration
	// Ignored is set on stdio servers, where the block has no effect.
	Ignored bool
}

// parseTokenExchange reads a server's "token_exchange" block, or returns
// nil when absent. Unknown keys are problems.
func parseTokenExchange(n *rawdoc.Node, f *findings) *TokenExchange {
	o := objectAt(n, "token_exchange", f)
	if o == nil {
		return nil
	}
	x := &TokenExchange{
		Enabled:            o.boolean("enabled", true),
		TokenURL:           o.str("token_url", ""),
		ClientID:           o.str("client_id", ""),
		ClientSecret:       o.secret("client_secret"),
		AuthStyle:          o.oneOf("auth_style", "auto", "auto", "basic", "post"),
		SubjectHeader:      "Authorization",
		SubjectTokenType:   o.str("subject_token_type", TokenTypeAccess),
		Audience:           o.str("audience", ""),
		Resource:           o.str("resource", ""),
		Scope:              o.str("scope", ""),
		RequestedTokenType: o.str("requested_token_type", TokenTypeAccess),
		ActorToken:         o.secret("actor_token"),
		ActorTokenType:     o.str("actor_token_type", TokenTypeAccess),
		Header:             "Authorization",
		TokenPrefix:        o.str("token_prefix", "Bearer"),
		RefreshSkew:        o.secondsInRange("refresh_skew_seconds", 60*time.Second, 0, 86400),
	}
	o.headerName("subject_header", &x.SubjectHeader)
	o.headerName("header", &x.Header)
	x.check(o)
	o.rejectUnknown()
	return x
}

// check reports the problems of the block: an http(s) token URL and a
// client id (required when enabled), URN token types, an absolute resource
// URI and a one-word token prefix.
func (x *TokenExchange) check(o *object) {
	if x.TokenURL != "" {
		checkHTTPURL(x.TokenURL, o.field("token_url"), o.f)
	} else if x.Enabled {
		o.f.problem(o.field("token_url"), "token exchange needs token_url, the token endpoint of the authorization server")
	}
	if x.ClientID == "" && x.Enabled {
		o.f.problem(o.field("client_id"), "token exchange needs client_id, mcp-mux's client at the token endpoint")
	}
	for _, t := range []struct{ key, v string }{
		{"subject_token_type", x.SubjectTokenType}, {"requested_token_type", x.RequestedTokenType}, {"actor_token_type", x.ActorTokenType},
	} {
		if !strings.HasPrefix(t.v, "urn:") {
			o.f.problem(o.field(t.key), "must be a token type URN such as %s", TokenTypeAccess)
		}
	}
	if x.Resource != "" {
		if u, err := url.Parse(x.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
			o.f.problem(o.field("resource"), "must be an absolute URI without a fragment (RFC 8707)")
		}
	}
	if strings.ContainsAny(x.TokenPrefix, " \t\r\n") {
		o.f.problem(o.field("token_prefix"), "must be one word such as Bearer, or \"\" for the bare token")
	}
}
