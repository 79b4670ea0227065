package proxy_test

// Issue 32, end to end through a real mux: the caller's user id is bounded
// (attack 4), profile selection fails closed on a claim or header that
// names no profile (attack 9), and token exchange follows no redirect
// (attack 12).

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

const claimIssuer, claimAudience = "https://idp.example", "mcp-mux-test"

// claimIdP is a real JWKS endpoint with one RSA key, k1.
type claimIdP struct {
	*httptest.Server
	key *rsa.PrivateKey
}

func startClaimIdP(t *testing.T) *claimIdP {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &claimIdP{key: key}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	}))
	t.Cleanup(p.Close)
	return p
}

// sign returns a valid token for subject u-1 with extra claims.
func (p *claimIdP) sign(t *testing.T, extra map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: p.key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	c := jwt.Claims{Issuer: claimIssuer, Audience: jwt.Audience{claimAudience}, Subject: "u-1", Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	tok, err := jwt.Signed(sig).Claims(c).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// twoProfileServers is the mcpServers and profiles blocks of profileMux
// (profiles a and b), with fresh upstreams.
func twoProfileServers(t *testing.T) string {
	t.Helper()
	url := func(name string) string { return mcptest.ServeHTTP(t, mcptest.NewServer(name)).URL + "/mcp" }
	return fmt.Sprintf(`"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q}},
	  "profiles": {
	    "a": {"servers": ["alpha"], "exclude_tools": ["alpha_sl*"]},
	    "b": {"servers": ["beta"], "include_tools": ["beta_e*", "beta_add"]}}`, url("alpha"), url("beta"))
}

// initializeWith posts an initialize to endpoint with the header lines hdr
// (name, value pairs; a name may repeat).
func initializeWith(t *testing.T, endpoint string, hdr ...string) (int, string) {
	t.Helper()
	req := mcpRequest(t, context.Background(), http.MethodPost, endpoint, nil, initializeBody)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

// TestProfileClaimFailsClosed (attack 9): a JWT profile claim that is not
// a string, is empty, is past bounds.Profile or names no profile is 403
// at /mcp and at every /mcp/{profile}, naming the claim and never echoing
// a long value; a valid claim binds the caller, and a token without the
// claim is a caller no profile_by selects (every tool, as documented).
func TestProfileClaimFailsClosed(t *testing.T) {
	idp := startClaimIdP(t)
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "jwt", "jwks_url": %q, "issuer": %q, "audience": %q},
	  "profile_by": {"jwt_claim": "mux_profile"}}, %s}`, idp.URL, claimIssuer, claimAudience, twoProfileServers(t))
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	long := strings.Repeat("a", 200)
	for name, v := range map[string]any{"array": []string{"a"}, "object": map[string]any{"name": "a"}, "number": 7, "boolean": true,
		"null": nil, "empty": "", "blank": " ", "long": long, "unknown": "nope"} {
		tok := idp.sign(t, map[string]any{"mux_profile": v})
		for _, path := range []string{"/mcp", "/mcp/a", "/mcp/b"} {
			status, body := initializeWith(t, m.ts.URL+path, "Authorization", "Bearer "+tok)
			if status != http.StatusForbidden || !strings.Contains(body, "mux_profile") || strings.Contains(body, long) {
				t.Errorf("%s claim at %s: HTTP %d %.300s; want 403 naming the claim", name, path, status, body)
			}
		}
		if _, err := connectProfile(t, m.ts.URL+"/mcp", tok); err == nil {
			t.Errorf("a go-sdk client with a %s profile claim connected", name)
		}
	}
	cs, err := connectProfile(t, m.ts.URL+"/mcp", idp.sign(t, map[string]any{"mux_profile": "a"}))
	if err != nil || sessionTools(t, cs) != profileA {
		t.Fatalf("a valid claim: %v", err)
	}
	cs, err = connectProfile(t, m.ts.URL+"/mcp", idp.sign(t, nil))
	if err != nil || !strings.Contains(sessionTools(t, cs), "beta_pid") {
		t.Fatalf("no claim: %v, want every tool", err)
	}
}

// TestProfileHeaderFailsClosed (attack 9, header selection): a profile
// header that is sent but empty, sent twice, or past bounds.Profile is
// 403; an absent one leaves the caller unbound.
func TestProfileHeaderFailsClosed(t *testing.T) {
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-Remote-User",
	  "profile_by": {"header": "X-Profile"}}, %s}`, twoProfileServers(t))
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	long := strings.Repeat("b", 200)
	for name, hdr := range map[string][]string{
		"empty": {"X-Profile", ""}, "blank": {"X-Profile", "  "}, "twice": {"X-Profile", "a", "X-Profile", "b"},
		"long": {"X-Profile", long}, "unknown": {"X-Profile", "nope"},
	} {
		for _, path := range []string{"/mcp", "/mcp/a", "/mcp/b"} {
			status, body := initializeWith(t, m.ts.URL+path, append([]string{"X-Remote-User", "alice"}, hdr...)...)
			if status != http.StatusForbidden || !strings.Contains(body, "X-Profile") || strings.Contains(body, long) {
				t.Errorf("%s X-Profile at %s: HTTP %d %.300s; want 403 naming the header", name, path, status, body)
			}
		}
	}
	if status, body := initializeWith(t, m.ts.URL+"/mcp/b", "X-Remote-User", "alice", "X-Profile", "b"); status != http.StatusOK {
		t.Errorf("X-Profile b at /mcp/b: HTTP %d %s", status, body)
	}
	if status, body := initializeWith(t, m.ts.URL+"/mcp/a", "X-Remote-User", "alice"); status != http.StatusOK {
		t.Errorf("no X-Profile at /mcp/a: HTTP %d %s", status, body)
	}
}

// TestProfileAPIKeyMappedToNothing (attack 9, api key selection): a key
// profile_by.api_keys maps to "" is a config problem, not an unbound
// caller.
func TestProfileAPIKeyMappedToNothing(t *testing.T) {
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "k-alice"}},
	  "profile_by": {"api_keys": {"alice": ""}}}, %s}`, twoProfileServers(t))
	_, err := config.Parse([]byte(cfg), config.LoadOptions{Filename: "test.json"})
	if err == nil || !strings.Contains(err.Error(), "inbound.profile_by.api_keys.alice") {
		t.Fatalf("config with an api key mapped to no profile: %v, want a problem naming inbound.profile_by.api_keys.alice", err)
	}
}

// TestUserIDBounded (attack 4): a trusted-header user past bounds.User or
// with a control character is a 401 naming the header and the bound,
// never the value; so is a JWT user claim past it.
func TestUserIDBounded(t *testing.T) {
	up := startEchoUpstream(t, "up")
	m, _ := startMuxEnv(t, `{"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-Remote-User"}, `+identityServer(t, up)+`}`, nil, proxy.Options{})
	long := "alice" + strings.Repeat("z", 300)
	for name, v := range map[string]string{"long": long, "control": "ali\u0085ce", "invalid UTF-8": "ali\xffce"} {
		status, body := initializeWith(t, m.ts.URL+"/mcp", "X-Remote-User", v)
		if status != http.StatusUnauthorized || !strings.Contains(body, "X-Remote-User") || strings.Contains(body, "zzzz") {
			t.Errorf("%s user: HTTP %d %.300s; want 401 naming the header, not the value", name, status, body)
		}
	}
	if status, body := initializeWith(t, m.ts.URL+"/mcp", "X-Remote-User", long); !strings.Contains(body, "256") {
		t.Errorf("long user: HTTP %d %.300s; want the bound named", status, body)
	}

	idp := startClaimIdP(t)
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "jwt", "jwks_url": %q, "issuer": %q, "audience": %q, "user_claim": "email"}}, %s}`,
		idp.URL, claimIssuer, claimAudience, identityServer(t, up))
	mj, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	status, body := initializeWith(t, mj.ts.URL+"/mcp", "Authorization", "Bearer "+idp.sign(t, map[string]any{"email": long}))
	if status != http.StatusUnauthorized || !strings.Contains(body, "email") || strings.Contains(body, "zzzz") {
		t.Errorf("long user claim: HTTP %d %.300s; want 401 naming the claim, not the value", status, body)
	}
}

// TestTokenExchangeFollowsNoRedirect (attack 12): a token endpoint that
// answers 307 gets no second request: the redirect target sees neither the
// client secret nor the caller's subject token, the call is a tool error
// naming the server and the endpoint, and nothing reaches the upstream.
func TestTokenExchangeFollowsNoRedirect(t *testing.T) {
	up := startEchoUpstream(t, "up")
	var stolen atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		stolen.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"sekrit-stolen","token_type":"N_A","expires_in":3600}`)
	}))
	t.Cleanup(target.Close)
	from := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(from.Close)
	tok := &tokenServer{Server: from}
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY"}}}, %s}`,
		exchangeServer(up, tok, `, "subject_header": "X-User-Token"`))
	m, _ := startMuxEnv(t, cfg, map[string]string{"ALICE_KEY": aliceKey, "XCHG_SECRET": xchgSecret}, proxy.Options{})
	alice, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+aliceKey, "X-User-Token", "Bearer "+aliceSubject)
	text, isErr := mustCall(t, context.Background(), alice, "up_headers", nil)
	if !isErr || !strings.Contains(text, "MCP server 'up'") || !strings.Contains(text, from.URL) || !strings.Contains(text, "redirect") {
		t.Errorf("call through a redirecting token endpoint: isError %v, %q; want a tool error naming the server, the endpoint and the redirect", isErr, text)
	}
	if n := stolen.Load(); n != 0 {
		t.Errorf("the redirect target got %d token requests (with the client secret and the caller's token), want 0", n)
	}
	if n := upstreamCalls(up); n != 0 {
		t.Errorf("the upstream got %d calls, want 0", n)
	}
	for _, s := range []string{aliceSubject, xchgSecret, "sekrit-stolen"} {
		if strings.Contains(m.logs.String(), s) || strings.Contains(text, s) {
			t.Errorf("a log line or the tool error contains %.16s…", s)
		}
	}
}
