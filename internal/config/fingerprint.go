package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// Fingerprint returns a sha256 hex digest of the fields that define the
// upstream connection: type, command, args, env, cwd, url, headers, oauth,
// session_scope, the timeouts and the pool bounds. Two servers with the same fingerprint can
// share a running upstream across a reload; description, routing, tools,
// task_toolsets, user_auth and headers_from_context do not affect it and must
// be read from the current Server.
//
// The digest covers secret values, so treat it as sensitive: compare it, do
// not log or expose it.
func (s *Server) Fingerprint() string {
	type oauth struct {
		Enabled                                                     bool
		TokenURL, GrantType, ClientID, ClientSecret, RefreshToken   string
		Scope, Audience, TokenField, TokenTypeField, ExpiresInField string
		DefaultTokenType, AuthStyle                                 string
		ClientMetadataURL, AuthorizationURL                         string
		RefreshSkew                                                 time.Duration
		ExtraTokenParams                                            map[string]string
	}
	fp := struct {
		Type, Command                       string
		Args                                []string
		Env                                 map[string]string
		Cwd                                 string `json:",omitempty"`
		URL                                 string
		Headers                             map[string]string
		OAuth                               *oauth
		SessionScope, ProtocolVersion       string
		SessionInitTimeout, ToolCallTimeout time.Duration
		MaxSessions                         int
		IdleTimeout                         time.Duration
	}{
		Type: s.Type, Command: s.Command, Env: reveal(s.Env), Cwd: s.Cwd,
		URL: s.URL, Headers: reveal(s.Headers), SessionScope: s.SessionScope, ProtocolVersion: s.ProtocolVersion,
		SessionInitTimeout: s.SessionInitTimeout, ToolCallTimeout: s.ToolCallTimeout,
		MaxSessions: s.MaxSessions, IdleTimeout: s.IdleTimeout,
	}
	if len(s.Args) > 0 {
		fp.Args = s.Args
	}
	if a := s.OAuth; a != nil {
		fp.OAuth = &oauth{
			Enabled: a.Enabled, TokenURL: a.TokenURL, GrantType: a.GrantType, ClientID: a.ClientID,
			ClientSecret: a.ClientSecret.Reveal(), RefreshToken: a.RefreshToken.Reveal(),
			Scope: a.Scope, Audience: a.Audience, TokenField: a.TokenField,
			TokenTypeField: a.TokenTypeField, ExpiresInField: a.ExpiresInField,
			DefaultTokenType: a.DefaultTokenType, AuthStyle: a.AuthStyle,
			RefreshSkew: a.RefreshSkew, ExtraTokenParams: reveal(a.ExtraTokenParams),
			ClientMetadataURL: a.ClientMetadataURL, AuthorizationURL: a.AuthorizationURL,
		}
	}
	// Marshalling plain strings, slices and maps (sorted keys) cannot fail.
	data, _ := json.Marshal(fp)
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func reveal(m map[string]secret.Value) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v.Reveal()
	}
	return out
}
