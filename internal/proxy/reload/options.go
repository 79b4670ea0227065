package reload

// The config → options mapping: every setting the proxy hands to upstream,
// headers and inbound comes from config through here. The functions return
// what config decides; the proxy adds its loggers, hooks and shared parts.

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/headers"
	"github.com/mcp-mux/mcp-mux/internal/inbound"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// UpstreamOptions returns a server's upstream settings: transport, command,
// working directory, URL, static headers, timeouts and pool bounds. The caller adds the
// logger, the supervisor, retry bounds and the hooks.
func UpstreamOptions(sc *config.Server) upstream.Options {
	return upstream.Options{
		Name:            sc.Name,
		Transport:       sc.Type,
		Command:         sc.Command,
		Args:            sc.Args,
		Dir:             sc.Cwd,
		URL:             sc.URL,
		InitTimeout:     sc.SessionInitTimeout,
		CallTimeout:     sc.ToolCallTimeout,
		Scope:           sc.SessionScope,
		ProtocolVersion: eraOf(sc.ProtocolVersion),
		MaxSessions:     sc.MaxSessions,
		IdleTimeout:     sc.IdleTimeout,
		Env:             reveal(sc.Env),
		Header:          staticHeader(sc.Headers),
	}
}

// staticHeader returns a server's static headers revealed, in their
// original spellings; nil when there are none.
func staticHeader(m map[string]secret.Value) http.Header {
	if len(m) == 0 {
		return nil
	}
	h := make(http.Header, len(m))
	for k, v := range m {
		h[k] = []string{v.Reveal()}
	}
	return h
}

// eraOf maps protocol_version to the upstream's setting.
func eraOf(v string) string {
	if v == "auto" {
		return upstream.VersionAuto
	}
	return v
}

// HeaderOptions returns a server's header rules (static headers, oauth,
// user_auth, headers_from_context, token_exchange); nil when it has none. Stdio servers have
// none (user_auth and headers_from_context are ignored there with a config
// warning). carrier is inbound.secrets_header, named in denials. The caller
// adds the logger.
func HeaderOptions(sc *config.Server, carrier string) *headers.Options {
	if sc.Type == config.TypeStdio {
		return nil
	}
	o := headers.Options{Server: sc.Name, Static: reveal(sc.Headers), OAuth: oauthOptions(sc),
		UserAuth: userAuthOptions(sc.UserAuth), FromContext: fromContextOptions(sc.HeadersFromContext, carrier),
		TokenExchange: exchangeOptions(sc.TokenExchange)}
	if o.Static == nil && o.OAuth == nil && o.UserAuth == nil && o.FromContext == nil && o.TokenExchange == nil {
		return nil
	}
	return &o
}

// oauthOptions returns a server's enabled oauth block as the resolver's
// options; nil when it has none, or when each caller connects their own
// account (authorization_code: the accounts stage's, not the resolver's).
func oauthOptions(sc *config.Server) *headers.OAuthOptions {
	a := sc.OAuth
	if a == nil || !a.Enabled || a.PerUser() {
		return nil
	}
	return &headers.OAuthOptions{
		TokenURL: a.TokenURL, ResourceURL: sc.URL, GrantType: a.GrantType,
		ClientID: a.ClientID, ClientSecret: a.ClientSecret.Reveal(), RefreshToken: a.RefreshToken.Reveal(),
		Scope: a.Scope, Audience: a.Audience,
		TokenField: a.TokenField, TokenTypeField: a.TokenTypeField, ExpiresInField: a.ExpiresInField,
		DefaultTokenType: a.DefaultTokenType, RefreshSkew: a.RefreshSkew, AuthStyle: a.AuthStyle,
		ExtraParams: reveal(a.ExtraTokenParams),
	}
}

// exchangeOptions returns an enabled token_exchange block as the
// resolver's options; nil when there is none or it is ignored.
func exchangeOptions(x *config.TokenExchange) *headers.ExchangeOptions {
	if x == nil || !x.Enabled || x.Ignored {
		return nil
	}
	return &headers.ExchangeOptions{
		TokenURL: x.TokenURL, ClientID: x.ClientID, ClientSecret: x.ClientSecret.Reveal(), AuthStyle: x.AuthStyle,
		SubjectHeader: x.SubjectHeader, SubjectTokenType: x.SubjectTokenType,
		Audience: x.Audience, Resource: x.Resource, Scope: x.Scope, RequestedTokenType: x.RequestedTokenType,
		ActorToken: x.ActorToken.Reveal(), ActorTokenType: x.ActorTokenType,
		Header: x.Header, TokenPrefix: x.TokenPrefix, RefreshSkew: exchangeSkew(x.RefreshSkew),
	}
}

// exchangeSkew maps refresh_skew_seconds to ExchangeOptions.RefreshSkew,
// where 0 means the default: a configured 0 is no skew.
func exchangeSkew(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// userAuthOptions returns an enabled user_auth block as the resolver's
// options; nil when there is none or it is ignored.
func userAuthOptions(u *config.UserAuth) *headers.UserAuthOptions {
	if u == nil || !u.Enabled || u.Ignored {
		return nil
	}
	return &headers.UserAuthOptions{Header: u.Header, OnMissing: u.OnMissing, Users: revealAll(u.Users)}
}

// fromContextOptions returns an enabled headers_from_context block with
// headers as the resolver's options; nil otherwise.
func fromContextOptions(h *config.HeadersFromContext, carrier string) *headers.FromContextOptions {
	if h == nil || !h.Enabled || h.Ignored || len(h.Headers) == 0 {
		return nil
	}
	return &headers.FromContextOptions{Headers: h.Headers, OnMissing: h.OnMissing, Carrier: carrier}
}

// HeaderKey identifies a resolver's inputs: equal keys, equal rules. It
// hashes secrets: compare it, never log it. "" for nil.
func HeaderKey(o *headers.Options) string {
	if o == nil {
		return ""
	}
	c := *o
	c.Logger, c.HTTPClient = nil, nil
	data, _ := json.Marshal(c) // strings, maps and pointers to them: cannot fail
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// InboundOptions returns the caller identification settings of
// inbound.auth. The caller adds the logger.
func InboundOptions(in *config.Inbound) inbound.Options {
	a := in.Auth
	return inbound.Options{
		Mode: a.Mode, UserHeader: in.UserHeader, Keys: revealAll(a.Keys),
		JWKSURL: a.JWKSURL, Issuer: a.Issuer, Audience: a.Audience, UserClaim: a.UserClaim,
		ProfileClaim: in.ProfileBy.JWTClaim,
	}
}

// reveal returns m's values revealed; nil when m is empty.
func reveal(m map[string]secret.Value) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return revealAll(m)
}

// revealAll returns m's values revealed, in a map that is never nil.
func revealAll(m map[string]secret.Value) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.Reveal()
	}
	return out
}
