package reload

import (
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

func TestUpstreamOptions(t *testing.T) {
	sc := &config.Server{Name: "a", Type: config.TypeHTTP, URL: "http://a/mcp", Command: "c", Args: []string{"x"},
		Env: map[string]secret.Value{"TOKEN": "t"}, Headers: map[string]secret.Value{"X-Key": "k"},
		SessionInitTimeout: time.Second, ToolCallTimeout: 2 * time.Second, SessionScope: "user",
		ProtocolVersion: "auto", MaxSessions: 3, IdleTimeout: 4 * time.Second}
	o := UpstreamOptions(sc)
	if o.Name != "a" || o.Transport != config.TypeHTTP || o.URL != sc.URL || o.Command != "c" || o.Args[0] != "x" ||
		o.InitTimeout != time.Second || o.CallTimeout != 2*time.Second || o.Scope != "user" ||
		o.ProtocolVersion != upstream.VersionAuto || o.MaxSessions != 3 || o.IdleTimeout != 4*time.Second {
		t.Errorf("options = %+v", o)
	}
	if o.Env["TOKEN"] != "t" || o.Header.Get("X-Key") != "k" {
		t.Errorf("env %v, header %v: want the revealed values", o.Env, o.Header)
	}
	if o := UpstreamOptions(&config.Server{Name: "b", ProtocolVersion: "2025-06-18"}); o.Env != nil || o.Header != nil || o.ProtocolVersion != "2025-06-18" {
		t.Errorf("bare server options = %+v", o)
	}
}

func TestHeaderOptions(t *testing.T) {
	sc := &config.Server{Name: "a", Type: config.TypeHTTP, URL: "http://a/mcp",
		OAuth: &config.OAuth{Enabled: true, TokenURL: "http://idp/token", ClientSecret: "cs",
			ExtraTokenParams: map[string]secret.Value{"resource": "r"}},
		HeadersFromContext: &config.HeadersFromContext{Enabled: true, Headers: map[string]string{"X-Tenant": "tenant"}}}
	o := HeaderOptions(sc, "")
	if o == nil || o.OAuth == nil || o.OAuth.ResourceURL != sc.URL || o.OAuth.ClientSecret != "cs" || o.OAuth.ExtraParams["resource"] != "r" {
		t.Fatalf("oauth options = %+v", o)
	}
	if o.Static != nil || o.UserAuth != nil || o.FromContext.Headers["X-Tenant"] != "tenant" {
		t.Errorf("options = %+v", o)
	}
	off := &config.Server{Name: "b", Type: config.TypeHTTP, OAuth: &config.OAuth{TokenURL: "x"},
		UserAuth: &config.UserAuth{Enabled: true, Ignored: true}}
	if o := HeaderOptions(off, ""); o != nil {
		t.Errorf("disabled and ignored blocks: got %+v, want none", o)
	}
	if o := HeaderOptions(&config.Server{Name: "s", Type: config.TypeStdio, Headers: map[string]secret.Value{"X": "y"}}, ""); o != nil {
		t.Errorf("stdio: got %+v, want none", o)
	}
	if HeaderKey(nil) != "" || HeaderKey(o) != HeaderKey(HeaderOptions(sc, "")) || HeaderKey(o) == HeaderKey(HeaderOptions(&config.Server{Type: config.TypeHTTP, Headers: map[string]secret.Value{"X": "y"}}, "")) {
		t.Error("HeaderKey does not identify the rules")
	}
}

func TestInboundOptions(t *testing.T) {
	in := &config.Inbound{UserHeader: "X-User", Auth: config.InboundAuth{Mode: config.AuthAPIKeys,
		Keys: map[string]secret.Value{"alice": "ka"}, JWKSURL: "j", Issuer: "i", Audience: "a", UserClaim: "c"}}
	o := InboundOptions(in)
	if o.Mode != config.AuthAPIKeys || o.UserHeader != "X-User" || o.Keys["alice"] != "ka" ||
		o.JWKSURL != "j" || o.Issuer != "i" || o.Audience != "a" || o.UserClaim != "c" {
		t.Errorf("options = %+v", o)
	}
	if o := InboundOptions(&config.Inbound{}); o.Keys == nil {
		t.Error("no keys: want an empty map, got nil")
	}
}
