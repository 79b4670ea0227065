package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"time"

	"github.com/mcp-mux/mcp-mux/config"
	"github.com/mcp-mux/mcp-mux/headers"
	"github.com/mcp-mux/mcp-mux/upstream"
)

// resolverOptions returns a server's header rules and their key (see
// headerKey); nil when it has none. Stdio servers have none (user_auth and
// headers_from_context are ignored there with a config warning).
func (s *Server) resolverOptions(sc *config.Server) (*headers.Options, string) {
	if sc.Type == config.TypeStdio {
		return nil, ""
	}
	o := headers.Options{Server: sc.Name, Logger: s.log.Named("headers").With("server", sc.Name)}
	if len(sc.Headers) > 0 {
		o.Static = make(map[string]string, len(sc.Headers))
		for k, v := range sc.Headers {
			o.Static[k] = v.Reveal()
		}
	}
	if a := sc.OAuth; a != nil && a.Enabled {
		o.OAuth = &headers.OAuthOptions{
			TokenURL: a.TokenURL, ResourceURL: sc.URL, GrantType: a.GrantType,
			ClientID: a.ClientID, ClientSecret: a.ClientSecret.Reveal(), RefreshToken: a.RefreshToken.Reveal(),
			Scope: a.Scope, Audience: a.Audience,
			TokenField: a.TokenField, TokenTypeField: a.TokenTypeField, ExpiresInField: a.ExpiresInField,
			DefaultTokenType: a.DefaultTokenType, RefreshSkew: a.RefreshSkew, AuthStyle: a.AuthStyle,
		}
		if len(a.ExtraTokenParams) > 0 {
			o.OAuth.ExtraParams = make(map[string]string, len(a.ExtraTokenParams))
			for k, v := range a.ExtraTokenParams {
				o.OAuth.ExtraParams[k] = v.Reveal()
			}
		}
	}
	if u := sc.UserAuth; u != nil && u.Enabled && !u.Ignored {
		o.UserAuth = &headers.UserAuthOptions{Header: u.Header, OnMissing: u.OnMissing, Users: make(map[string]string, len(u.Users))}
		for k, v := range u.Users {
			o.UserAuth.Users[k] = v.Reveal()
		}
	}
	if h := sc.HeadersFromContext; h != nil && h.Enabled && !h.Ignored && len(h.Headers) > 0 {
		o.FromContext = &headers.FromContextOptions{Headers: h.Headers, OnMissing: h.OnMissing}
	}
	if o.Static == nil && o.OAuth == nil && o.UserAuth == nil && o.FromContext == nil {
		return nil, ""
	}
	return &o, headerKey(&o)
}

// callHeaders resolves the upstream headers of one call to b by user, with
// the secrets carried on the request's headers h, and a fingerprint of them
// for the session key when they depend on the caller (sessions opened with
// one caller's credentials are never used for another).
func (s *Server) callHeaders(ctx context.Context, b *backend, user string, h http.Header) (http.Header, string, error) {
	if b.resolver == nil {
		return nil, "", nil
	}
	var secrets map[string]string
	if name := s.rt.Load().cfg.Inbound.SecretsHeader; name != "" && h != nil {
		if v := h.Get(name); v != "" {
			var err error
			if secrets, err = headers.ParseSecrets(name, v); err != nil {
				return nil, "", &headers.DenyError{Msg: err.Error()}
			}
		}
	}
	out, err := b.resolver.ForCall(ctx, user, secrets)
	if err != nil || !b.resolver.PerCaller() {
		return out, "", err
	}
	return out, fingerprint(user, out), nil
}

// fingerprint hashes a user and header set; it identifies, never reveals.
func fingerprint(user string, h http.Header) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	sort.Strings(names)
	d := sha256.New()
	d.Write([]byte(user))
	for _, k := range names {
		d.Write([]byte{0})
		d.Write([]byte(k))
		for _, v := range h[k] {
			d.Write([]byte{1})
			d.Write([]byte(v))
		}
	}
	return hex.EncodeToString(d.Sum(nil)[:12])
}

// forwardCall sends a tools/call upstream with the caller's headers. An
// upstream's 401 makes the resolver refresh its OAuth token, and the call is
// retried once with the new headers.
func (s *Server) forwardCall(ctx context.Context, st *session, k sink, key upstream.Key, h http.Header, r *route, params json.RawMessage) (raw json.RawMessage, err error) {
	b := r.Server
	start := time.Now()
	defer func() { b.metrics.record(start, err) }()
	for attempt := 0; ; attempt++ {
		hdr, cred, herr := s.callHeaders(ctx, b, st.user, h)
		if herr != nil {
			return nil, herr
		}
		key.Cred = cred
		raw, err = b.up.CallTool(withSink(ctx, k), key, params, hdr)
		var se *upstream.StatusError
		if attempt == 0 && errors.As(err, &se) && se.Code == http.StatusUnauthorized && b.resolver != nil {
			b.resolver.UnauthorizedHeader(hdr)
			continue
		}
		return raw, err
	}
}
