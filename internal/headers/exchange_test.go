package headers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// exchangeResolver is a Resolver with a token_exchange block against ts.
func exchangeResolver(t *testing.T, ts *tokenServer, edit func(*ExchangeOptions)) *Resolver {
	t.Helper()
	o := &ExchangeOptions{TokenURL: ts.URL + "/token", ClientID: "mux", ClientSecret: "mux-secret",
		Audience: "https://api.example", Scope: "read write", TokenPrefix: "Bearer"}
	if edit != nil {
		edit(o)
	}
	r := mustNew(t, Options{Server: "api", TokenExchange: o, Static: map[string]string{"Authorization": "Bearer static", "X-Static": "s"}})
	t.Cleanup(r.Close)
	return r
}

// bearerOf returns inbound headers carrying tok as a bearer token.
func bearerOf(tok string) http.Header { return http.Header{"Authorization": {"Bearer " + tok}} }

// exchangedTokens answers each exchange with a token naming the subject and
// the request number.
func exchangedTokens(expiresIn int) func(int, tokenRequest) (int, string, string) {
	return func(n int, req tokenRequest) (int, string, string) {
		return http.StatusOK, "application/json", fmt.Sprintf(`{"access_token":"up-%s-%d","issued_token_type":%q,"token_type":"N_A","expires_in":%d}`,
			req.form.Get("subject_token"), n, TokenTypeAccess, expiresIn)
	}
}

func forRequest(t *testing.T, r *Resolver, user string, in http.Header) http.Header {
	t.Helper()
	h, err := r.ForRequest(context.Background(), user, nil, in)
	if err != nil {
		t.Fatalf("ForRequest(%s): %v", user, err)
	}
	return h
}

// TestExchangeForm: the token endpoint gets RFC 8693's fields and the
// client's credentials; the exchanged token replaces the static
// Authorization, other static headers stay.
func TestExchangeForm(t *testing.T) {
	ts := newTokenServer(t, exchangedTokens(3600))
	r := exchangeResolver(t, ts, func(o *ExchangeOptions) {
		o.AuthStyle = AuthStyleBasic
		o.Resource = "https://api.example/mcp"
		o.ActorToken = "actor-secret"
		o.ActorTokenType = TokenTypeJWT
	})
	h := forRequest(t, r, "alice", bearerOf("alice-token"))
	wantHeader(t, h, map[string]string{"Authorization": "Bearer up-alice-token-1", "X-Static": "s"})
	req := ts.request(0)
	want := map[string]string{
		"grant_type":           GrantTokenExchange,
		"subject_token":        "alice-token",
		"subject_token_type":   TokenTypeAccess,
		"requested_token_type": TokenTypeAccess,
		"audience":             "https://api.example",
		"resource":             "https://api.example/mcp",
		"scope":                "read write",
		"actor_token":          "actor-secret",
		"actor_token_type":     TokenTypeJWT,
	}
	for k, v := range want {
		if got := req.form.Get(k); got != v {
			t.Errorf("form %s = %q, want %q", k, got, v)
		}
	}
	if !req.basic || req.basicUser != "mux" || req.basicPass != "mux-secret" || req.form.Has("client_secret") {
		t.Errorf("client auth: basic=%v user=%q secret in form=%v, want Basic mux:mux-secret", req.basic, req.basicUser, req.form.Has("client_secret"))
	}
	if !r.PerCaller() {
		t.Error("a token_exchange resolver must be PerCaller")
	}

	// post style, no actor, a subject header of its own without Bearer.
	ts2 := newTokenServer(t, exchangedTokens(3600))
	r2 := exchangeResolver(t, ts2, func(o *ExchangeOptions) {
		o.AuthStyle, o.SubjectHeader, o.Header, o.TokenPrefix = AuthStylePost, "X-User-Token", "X-Upstream-Token", ""
	})
	h = forRequest(t, r2, "bob", http.Header{"X-User-Token": {"bob-token"}})
	wantHeader(t, h, map[string]string{"Authorization": "Bearer static", "X-Static": "s", "X-Upstream-Token": "up-bob-token-1"})
	req = ts2.request(0)
	if req.basic || req.form.Get("client_id") != "mux" || req.form.Get("client_secret") != "mux-secret" || req.form.Has("actor_token") {
		t.Errorf("post style: basic=%v form=%v", req.basic, req.form)
	}
}

// TestExchangeCachedPerCaller: one exchange per caller and subject token
// within the token's lifetime, concurrent callers sharing it.
func TestExchangeCachedPerCaller(t *testing.T) {
	ts := newTokenServer(t, exchangedTokens(3600))
	r := exchangeResolver(t, ts, nil)
	var wg sync.WaitGroup
	for range 8 {
		for _, u := range []string{"alice", "bob"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				h, err := r.ForRequest(context.Background(), u, nil, bearerOf(u+"-token"))
				if err != nil || !strings.HasPrefix(h.Get("Authorization"), "Bearer up-"+u+"-token-") {
					t.Errorf("%s: %v %q", u, err, h.Get("Authorization"))
				}
			}()
		}
	}
	wg.Wait()
	if n := ts.hits(); n != 2 {
		t.Fatalf("token endpoint hits = %d, want 2 (one per caller)", n)
	}
	// A new subject token of the same caller is exchanged; the old one stays cached.
	forRequest(t, r, "alice", bearerOf("alice-token-2"))
	forRequest(t, r, "alice", bearerOf("alice-token"))
	if n := ts.hits(); n != 3 {
		t.Fatalf("token endpoint hits = %d, want 3", n)
	}
}

// TestExchangeRefreshBeforeExpiry: a token is exchanged again before it expires.
func TestExchangeRefreshBeforeExpiry(t *testing.T) {
	ts := newTokenServer(t, exchangedTokens(2))
	r := exchangeResolver(t, ts, func(o *ExchangeOptions) { o.RefreshSkew = 800 * time.Millisecond })
	first := forRequest(t, r, "alice", bearerOf("a")).Get("Authorization")
	if again := forRequest(t, r, "alice", bearerOf("a")).Get("Authorization"); again != first || ts.hits() != 1 {
		t.Fatalf("second call: %q after %q, %d hits; want the cached token", again, first, ts.hits())
	}
	time.Sleep(1300 * time.Millisecond) // past expiry - skew (1.2 s), before expiry (2 s)
	if next := forRequest(t, r, "alice", bearerOf("a")).Get("Authorization"); next != "Bearer up-a-2" || ts.hits() != 2 {
		t.Fatalf("after the skew: %q, %d hits; want a new token", next, ts.hits())
	}
}

// TestExchangeDenied: no caller token, and a refused exchange, are denials
// naming the server, with no token in them; nothing is cached.
func TestExchangeDenied(t *testing.T) {
	ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) {
		return http.StatusBadRequest, "application/json", `{"error":"invalid_grant","error_description":"subject alice-token is bad"}`
	})
	r := exchangeResolver(t, ts, func(o *ExchangeOptions) { o.AuthStyle = AuthStyleBasic })
	_, err := r.ForRequest(context.Background(), "alice", nil, http.Header{})
	wantDeny(t, err, "MCP server 'api': token exchange needs the caller's token in the Authorization request header, and this request has none. "+
		"Send your access token there (as a Bearer token for Authorization).")
	if ts.hits() != 0 {
		t.Fatal("an exchange without a subject token reached the endpoint")
	}
	for i := range 2 {
		_, err = r.ForRequest(context.Background(), "alice", nil, bearerOf("alice-token"))
		wantDeny(t, err, fmt.Sprintf("MCP server 'api': token exchange endpoint %s/token refused the request (HTTP 400): invalid_grant", ts.URL))
		if ts.hits() != i+1 {
			t.Fatalf("hits = %d, want %d (a failure is not cached)", ts.hits(), i+1)
		}
	}
	for _, s := range []string{"alice-token", "mux-secret"} {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("denial %q reveals %q", err, s)
		}
	}
}

// TestExchangeUnauthorized: an upstream 401 for the exchanged token makes
// the next call exchange again.
func TestExchangeUnauthorized(t *testing.T) {
	ts := newTokenServer(t, exchangedTokens(3600))
	r := exchangeResolver(t, ts, nil)
	sent := forRequest(t, r, "alice", bearerOf("a"))
	r.UnauthorizedHeader(sent)
	if got := forRequest(t, r, "alice", bearerOf("a")).Get("Authorization"); got != "Bearer up-a-2" {
		t.Fatalf("after a 401: %q, want a new exchange", got)
	}
	// A header of its own is found too.
	ts2 := newTokenServer(t, exchangedTokens(3600))
	r2 := exchangeResolver(t, ts2, func(o *ExchangeOptions) { o.Header = "X-Upstream-Token" })
	r2.UnauthorizedHeader(http.Header{"x-upstream-token": {forRequest(t, r2, "alice", bearerOf("a")).Get("X-Upstream-Token")}})
	if got := forRequest(t, r2, "alice", bearerOf("a")).Get("X-Upstream-Token"); got != "Bearer up-a-2" {
		t.Fatalf("after a 401 on X-Upstream-Token: %q, want a new exchange", got)
	}
}

// TestExchangeClose: a closed resolver's exchanges fail.
func TestExchangeClose(t *testing.T) {
	ts := newTokenServer(t, exchangedTokens(3600))
	r := exchangeResolver(t, ts, nil)
	r.Close()
	var d *DenyError
	if _, err := r.ForRequest(context.Background(), "alice", nil, bearerOf("a")); !errors.As(err, &d) || !strings.Contains(d.Msg, "MCP server 'api'") {
		t.Fatalf("after Close: %v, want a denial naming the server", err)
	}
}

// TestExchangeCacheBounds: the cache holds at most max entries, and one
// caller at most perCaller, evicting the least recently used.
func TestExchangeCacheBounds(t *testing.T) {
	c := newExchangeCache(4, 2)
	later := time.Now().Add(time.Hour)
	for i := range 10 {
		c.put(fmt.Sprint("m", i), "mallory", "v", later)
	}
	if c.len() != 2 {
		t.Fatalf("one caller holds %d entries, want 2", c.len())
	}
	c.put("a", "alice", "va", later)
	c.put("b", "bob", "vb", later)
	if _, ok := c.get("a", time.Now()); !ok {
		t.Fatal("alice's entry was evicted by mallory's")
	}
	c.put("c", "carol", "vc", later) // full: the least recently used (mallory's oldest) goes
	if c.len() != 4 {
		t.Fatalf("len = %d, want 4", c.len())
	}
	if _, ok := c.get("m8", time.Now()); ok {
		t.Fatal("the least recently used entry was kept")
	}
	if _, ok := c.get("a", later); ok {
		t.Fatal("an expired entry was returned")
	}
	if !c.dropValue("vb") || c.dropValue("vb") {
		t.Fatal("dropValue")
	}
}

// TestExchangeOptionsRejected: bad options are refused, naming the field.
func TestExchangeOptionsRejected(t *testing.T) {
	for _, tc := range []struct {
		o    ExchangeOptions
		want string
	}{
		{ExchangeOptions{ClientID: "c"}, "token_exchange.token_url is required"},
		{ExchangeOptions{TokenURL: "ftp://x/token", ClientID: "c"}, "token_exchange.token_url"},
		{ExchangeOptions{TokenURL: "https://x/token"}, "token_exchange.client_id is required"},
		{ExchangeOptions{TokenURL: "https://x/token", ClientID: "c", AuthStyle: "jwt"}, "token_exchange.OAuth auth_style"},
		{ExchangeOptions{TokenURL: "https://x/token", ClientID: "c", Header: "Bad Header"}, "token_exchange.header"},
		{ExchangeOptions{TokenURL: "https://x/token", ClientID: "c", SubjectHeader: "a:b"}, "token_exchange.subject_header"},
	} {
		_, err := New(Options{Server: "api", TokenExchange: &tc.o})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "MCP server 'api': ") {
			t.Errorf("%+v: %v, want %q", tc.o, err, tc.want)
		}
	}
}

// FuzzTokenResponse: any token endpoint answer is normalized to a JSON
// object with a non-empty access_token, or refused; never a panic.
func FuzzTokenResponse(f *testing.F) {
	f.Add("application/json", `{"access_token":"x","token_type":"N_A","expires_in":60,"issued_token_type":"urn:ietf:params:oauth:token-type:access_token"}`)
	f.Add("application/x-www-form-urlencoded", "access_token=x&expires_in=1e3")
	f.Add("application/json", `{"error":"invalid_grant"}`)
	f.Add("text/plain", "%zz")
	f.Add("application/json", `{"access_token":"x"} trailing`)
	fields := newResponseFields("", "", "")
	f.Fuzz(func(t *testing.T, contentType, body string) {
		out, err := fields.normalize(contentType, []byte(body))
		if err != nil {
			return
		}
		var m map[string]any
		if json.Unmarshal(out, &m) != nil {
			t.Fatalf("normalized %q to invalid JSON %q", body, out)
		}
		if tok, _ := m["access_token"].(string); tok == "" && m["error"] == nil {
			t.Fatalf("normalized %q without a token or error: %q", body, out)
		}
	})
}
