package headers

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// authServer is a real authorization server: RFC 8414 metadata and a token endpoint.
type authServer struct {
	*tokenServer
	mu        sync.Mutex
	metaHits  int
	methods   []string
	noMeta    bool
	issuerFix string // overrides the issuer in the metadata
}

func newAuthServer(t *testing.T, methods ...string) *authServer {
	as := &authServer{methods: methods}
	as.tokenServer = newTokenServer(t, numberedTokens)
	token := as.Config.Handler
	as.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			as.mu.Lock()
			as.metaHits++
			noMeta, issuer := as.noMeta, as.issuerFix
			as.mu.Unlock()
			if noMeta {
				http.NotFound(w, r)
				return
			}
			if issuer == "" {
				issuer = as.URL
			}
			writeJSON(w, map[string]any{
				"issuer":                                issuer,
				"token_endpoint":                        as.URL + "/oauth/token",
				"authorization_endpoint":                as.URL + "/authorize",
				"response_types_supported":              []string{"code"},
				"grant_types_supported":                 []string{"client_credentials"},
				"code_challenge_methods_supported":      []string{"S256"},
				"token_endpoint_auth_methods_supported": as.methods,
			})
		case "/oauth/token", "/token":
			token.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
	return as
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// resourceServer is a protected MCP endpoint at /mcp: 401 without a token,
// with protected resource metadata at prmPath.
type resourceServer struct {
	*httptest.Server
	mu         sync.Mutex
	probes     int
	prmHits    int
	challenge  bool   // put resource_metadata in WWW-Authenticate
	prmPath    string // where the metadata is served
	scope      string // scope in the challenge
	authServer string
	resource   string // overrides the metadata's resource
	noAS       bool
}

func newResourceServer(t *testing.T, authServerURL string, challenge bool, prmPath string) *resourceServer {
	rs := &resourceServer{challenge: challenge, prmPath: prmPath, authServer: authServerURL}
	rs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		switch {
		case r.URL.Path == "/mcp" && r.Method == http.MethodPost:
			rs.probes++
			if r.Header.Get("Authorization") == "" {
				c := `Bearer error="invalid_token"`
				if rs.challenge {
					c += `, resource_metadata="` + rs.URL + rs.prmPath + `"`
				}
				if rs.scope != "" {
					c += `, scope="` + rs.scope + `"`
				}
				w.Header().Set("WWW-Authenticate", c)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			writeJSON(w, map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{}})
		case r.URL.Path == rs.prmPath && r.Method == http.MethodGet:
			rs.prmHits++
			res := rs.resource
			if res == "" {
				res = rs.URL + "/mcp"
			}
			prm := map[string]any{"resource": res, "scopes_supported": []string{"mcp:tools"}}
			if !rs.noAS {
				prm["authorization_servers"] = []string{rs.authServer}
			}
			writeJSON(w, prm)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(rs.Close)
	return rs
}

func (rs *resourceServer) counts() (probes, prm int) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.probes, rs.prmHits
}

func TestDiscoveryViaChallenge(t *testing.T) {
	as := newAuthServer(t, "client_secret_basic")
	rs := newResourceServer(t, as.URL, true, "/meta/prm")
	rs.scope = "mcp:call"
	log, buf := testLogger()
	r := mustNew(t, Options{Logger: log, Static: map[string]string{"X-Route": "r1"}, OAuth: &OAuthOptions{
		ResourceURL: rs.URL + "/mcp", ClientID: "cid", ClientSecret: "csec",
	}})
	if got := authz(t, r); got != "Bearer tok-1" {
		t.Fatalf("Authorization = %q", got)
	}
	req := as.request(0)
	if !req.basic || req.basicUser != "cid" || req.basicPass != "csec" {
		t.Errorf("advertised client_secret_basic not used: %q %v", req.authHeader, req.form)
	}
	if req.form.Get("resource") != rs.URL+"/mcp" || req.form.Get("scope") != "mcp:call" ||
		req.form.Get("grant_type") != "client_credentials" {
		t.Errorf("token form = %v", req.form)
	}
	if !strings.Contains(buf.String(), "token_endpoint="+as.URL+"/oauth/token") {
		t.Errorf("discovery not logged:\n%s", buf)
	}

	// The discovery is cached: a refresh goes straight to the token endpoint.
	r.Unauthorized("Bearer tok-1")
	if got := authz(t, r); got != "Bearer tok-2" {
		t.Fatalf("after 401: %q", got)
	}
	probes, prm := rs.counts()
	as.mu.Lock()
	meta := as.metaHits
	as.mu.Unlock()
	if probes != 1 || prm != 1 || meta != 1 {
		t.Fatalf("probes=%d prm=%d metadata=%d, want 1 each", probes, prm, meta)
	}
}

func TestDiscoveryWellKnown(t *testing.T) {
	as := newAuthServer(t, "client_secret_post")
	rs := newResourceServer(t, as.URL, false, "/.well-known/oauth-protected-resource/mcp")
	r := mustNew(t, Options{OAuth: &OAuthOptions{ResourceURL: rs.URL + "/mcp", ClientID: "cid", ClientSecret: "csec", Scope: "mine"}})
	if got := authz(t, r); got != "Bearer tok-1" {
		t.Fatalf("Authorization = %q", got)
	}
	f := as.request(0).form
	if f.Get("client_secret") != "csec" || as.request(0).basic {
		t.Errorf("advertised client_secret_post not used: %v", f)
	}
	if f.Get("scope") != "mine" {
		t.Errorf("configured scope should win over scopes_supported: %v", f)
	}
}

func TestDiscoveryScopesSupported(t *testing.T) {
	as := newAuthServer(t)
	rs := newResourceServer(t, as.URL, true, "/prm")
	r := mustNew(t, Options{OAuth: &OAuthOptions{ResourceURL: rs.URL + "/mcp", ClientID: "cid", ClientSecret: "csec", AuthStyle: AuthStylePost}})
	authz(t, r)
	if f := as.request(0).form; f.Get("scope") != "mcp:tools" {
		t.Errorf("want PRM scopes_supported, form = %v", f)
	}
}

// TestDiscoveryFallback: no metadata anywhere: the server's origin is
// the authorization server and its token endpoint is /token (2025-03-26).
func TestDiscoveryFallback(t *testing.T) {
	as := newAuthServer(t)
	as.noMeta = true
	r := mustNew(t, Options{OAuth: &OAuthOptions{ResourceURL: as.URL + "/mcp", ClientID: "cid", ClientSecret: "csec"}})
	if got := authz(t, r); got != "Bearer tok-1" {
		t.Fatalf("Authorization = %q", got)
	}
}

func TestDiscoveryFailures(t *testing.T) {
	t.Run("resource mismatch", func(t *testing.T) {
		as := newAuthServer(t)
		rs := newResourceServer(t, as.URL, true, "/prm")
		rs.resource = "https://elsewhere.example/mcp"
		r := mustNew(t, Options{OAuth: &OAuthOptions{ResourceURL: rs.URL + "/mcp", ClientID: "cid", ClientSecret: "csec"}})
		_, err := r.ForCall(context.Background(), "u", nil)
		if err == nil || !strings.Contains(err.Error(), "MCP server 'srv': discovering the OAuth token endpoint: protected resource metadata") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("no authorization server", func(t *testing.T) {
		as := newAuthServer(t)
		rs := newResourceServer(t, as.URL, true, "/prm")
		rs.noAS = true
		r := mustNew(t, Options{OAuth: &OAuthOptions{ResourceURL: rs.URL + "/mcp", ClientID: "cid", ClientSecret: "csec"}})
		_, err := r.ForCall(context.Background(), "u", nil)
		if err == nil || !strings.Contains(err.Error(), "names no authorization server") {
			t.Fatalf("error = %v", err)
		}
	})
	t.Run("issuer mismatch, then fixed: not cached", func(t *testing.T) {
		as := newAuthServer(t)
		as.issuerFix = "https://evil.example"
		rs := newResourceServer(t, as.URL, true, "/prm")
		r := mustNew(t, Options{OAuth: &OAuthOptions{ResourceURL: rs.URL + "/mcp", ClientID: "cid", ClientSecret: "csec"}})
		_, err := r.ForCall(context.Background(), "u", nil)
		if err == nil || !strings.Contains(err.Error(), "authorization server metadata of "+as.URL) {
			t.Fatalf("error = %v", err)
		}
		as.mu.Lock()
		as.issuerFix = ""
		as.mu.Unlock()
		if got := authz(t, r); got != "Bearer tok-1" {
			t.Fatalf("after the fix: %q", got)
		}
	})
	t.Run("upstream down", func(t *testing.T) {
		ts := httptest.NewServer(http.NotFoundHandler())
		ts.Close()
		r := mustNew(t, Options{OAuth: &OAuthOptions{ResourceURL: ts.URL + "/mcp", ClientID: "cid", ClientSecret: "csec"}})
		_, err := r.ForCall(context.Background(), "u", nil)
		if err == nil || !strings.Contains(err.Error(), "discovering the OAuth token endpoint: probing "+ts.URL+"/mcp") {
			t.Fatalf("error = %v", err)
		}
	})
}
