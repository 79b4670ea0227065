package proxy_test

// End-to-end tests of caller identity (inbound.auth) and of secret hygiene
// across every credential path.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// identityServer is an upstream whose user_auth maps alice and bob, so the
// echoed Authorization shows which user mcp-mux resolved.
func identityServer(t *testing.T, up *echoUpstream) string {
	t.Helper()
	return fmt.Sprintf(`"mcpServers": {"up": {"type": "http", "url": %q,
	  "user_auth": {"users": {"alice": "Bearer cred-alice", "bob": "Bearer cred-bob", "alice@example.com": "Bearer cred-alice-jwt"}}}}`, up.url())
}

// wantChallenge checks an unauthenticated request's 401 and its challenge.
func wantChallenge(t *testing.T, what string, status int, h http.Header, body string, challenge string) {
	t.Helper()
	if status != http.StatusUnauthorized {
		t.Errorf("%s: HTTP %d, want 401 (%s)", what, status, body)
		return
	}
	if c := h.Get("WWW-Authenticate"); !strings.HasPrefix(c, "Bearer ") || !strings.Contains(c, challenge) {
		t.Errorf("%s: WWW-Authenticate = %q, want it to contain %q", what, c, challenge)
	}
}

func TestIdentityTrustedHeader(t *testing.T) {
	up := startEchoUpstream(t, "up")
	m, _ := startMuxEnv(t, `{"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-Remote-User"}, `+identityServer(t, up)+`}`, nil, proxy.Options{})
	for _, user := range []string{"alice", "bob"} {
		cs, _ := connectAs(t, m.ts.URL, "X-Remote-User", user)
		h := echoHeaders(t, context.Background(), cs, "up_headers")
		wantOne(t, h, "Authorization", "Bearer cred-"+user)
		if _, ok := h["x-remote-user"]; ok {
			t.Error("the identity header reached the upstream")
		}
	}
	status, h, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", nil, initializeBody)
	wantChallenge(t, "no user header", status, h, body, `realm="mcp-mux"`)
	if !strings.Contains(body, "X-Remote-User") {
		t.Errorf("401 body does not name the missing header: %s", body)
	}
}

func TestIdentityAPIKeys(t *testing.T) {
	up := startEchoUpstream(t, "up")
	m, _ := startMuxEnv(t, `{"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY"}}}, `+identityServer(t, up)+`}`,
		map[string]string{"ALICE_KEY": aliceKey, "BOB_KEY": bobKey}, proxy.Options{})
	for user, key := range map[string]string{"alice": aliceKey, "bob": bobKey} {
		cs, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+key)
		h := echoHeaders(t, context.Background(), cs, "up_headers")
		// The caller's API key is replaced, not forwarded.
		wantOne(t, h, "Authorization", "Bearer cred-"+user)
	}
	for what, hdr := range map[string]map[string]string{
		"missing key":  nil,
		"wrong key":    {"Authorization": "Bearer sekrit-apikey-wrong-9d8c"},
		"wrong scheme": {"Authorization": "Basic " + aliceKey},
		"empty bearer": {"Authorization": "Bearer "},
	} {
		status, h, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", hdr, initializeBody)
		wantChallenge(t, what, status, h, body, `realm="mcp-mux"`)
		if strings.Contains(body, "sekrit") {
			t.Errorf("%s: 401 body echoes the key: %s", what, body)
		}
	}
	// A wrong key on an established session is refused as well.
	cs, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+aliceKey)
	status, h, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp",
		map[string]string{"Authorization": "Bearer wrong", "Mcp-Session-Id": cs.ID(), "Mcp-Protocol-Version": "2025-11-25"},
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"up_headers","arguments":{}}}`)
	wantChallenge(t, "wrong key on a session", status, h, body, `realm="mcp-mux"`)
}

func TestIdentityJWT(t *testing.T) {
	up := startEchoUpstream(t, "up")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	}))
	t.Cleanup(jwks.Close)
	const issuer, audience = "https://idp.example", "mcp-mux-test"
	sign := func(k *rsa.PrivateKey, c jwt.Claims, extra map[string]any) string {
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(sig).Claims(c).Claims(extra).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	good := jwt.Claims{Issuer: issuer, Audience: jwt.Audience{audience}, Subject: "u-1", Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	email := map[string]any{"email": "alice@example.com"}

	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "jwt", "jwks_url": %q, "issuer": %q, "audience": %q, "user_claim": "email"}}, %s}`,
		jwks.URL, issuer, audience, identityServer(t, up))
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})

	cs, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+sign(key, good, email))
	wantOne(t, echoHeaders(t, context.Background(), cs, "up_headers"), "Authorization", "Bearer cred-alice-jwt")

	// Protected-resource metadata.
	resp, err := testHTTP.Get(m.ts.URL + "/.well-known/oauth-protected-resource")
	if err != nil {
		t.Fatal(err)
	}
	var md struct {
		Resource             string   `json:"resource"`
		AuthorizationServers []string `json:"authorization_servers"`
	}
	err = json.NewDecoder(resp.Body).Decode(&md)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || md.Resource != m.ts.URL+"/mcp" || len(md.AuthorizationServers) != 1 || md.AuthorizationServers[0] != issuer {
		t.Errorf("metadata: HTTP %d %+v err %v", resp.StatusCode, md, err)
	}

	expired := good
	expired.Expiry = jwt.NewNumericDate(now.Add(-time.Hour))
	wrongAud := good
	wrongAud.Audience = jwt.Audience{"someone-else"}
	wrongIss := good
	wrongIss.Issuer = "https://evil.example"
	wantMeta := fmt.Sprintf(`resource_metadata="%s/.well-known/oauth-protected-resource"`, m.ts.URL)
	for what, tok := range map[string]string{
		"missing":         "",
		"garbage":         "not.a.jwt",
		"wrong signature": sign(other, good, email),
		"expired":         sign(key, expired, email),
		"wrong audience":  sign(key, wrongAud, email),
		"wrong issuer":    sign(key, wrongIss, email),
		"no user claim":   sign(key, good, nil),
	} {
		hdr := map[string]string{}
		if tok != "" {
			hdr["Authorization"] = "Bearer " + tok
		}
		status, h, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", hdr, initializeBody)
		wantChallenge(t, what, status, h, body, wantMeta)
		if tok != "" && strings.Contains(body, tok) {
			t.Errorf("%s: 401 body echoes the token", what)
		}
	}
}

// TestNoSecretLeakage feeds distinctive secrets through every credential
// path, failing ones included, and checks that none appears in any log line
// or in any HTTP response the clients got (except the upstream echoes of
// successful calls, which show what the upstream legitimately received).
func TestNoSecretLeakage(t *testing.T) {
	upA := startEchoUpstream(t, "a")
	upB := startEchoUpstream(t, "b")
	const (
		static       = "sekrit-static-9f8e"
		clientSecret = "sekrit-client-secret-77aa"
		refresh      = "sekrit-refresh-1b2c"
		userAlice    = "sekrit-user-alice-3c4d"
		userBadNL    = "sekrit-user-mallory-5e6f"
		ctxGood      = "sekrit-ctx-1a2b"
		ctxBad       = "sekrit-ctx-crlf-3c4d"
		ctxMalformed = "sekrit-ctx-malformed-5e6f"
		wrongKey     = "sekrit-apikey-wrong-7a8b"
		malloryKey   = "sekrit-apikey-mallory-9c0d"
		tokenDesc    = "sekrit-oauth-desc-0e1f"
		tokenNL      = "sekrit-oauth-nl-2a3b"
		garbageBody  = "sekrit-oauth-garbage-4c5d"
	)
	good := startTokenServer(t, "sekrit-oauth", nil)
	refresher := startTokenServer(t, "", func(n int, r *http.Request) (int, string, string) {
		if r.PostForm.Get("refresh_token") == "" {
			return http.StatusBadRequest, "application/json", `{"error":"invalid_request"}`
		}
		b, _ := json.Marshal(map[string]any{"access_token": fmt.Sprintf("sekrit-oauth-rt-%d", n), "expires_in": 3600,
			"refresh_token": fmt.Sprintf("sekrit-refresh-rotated-%d", n)})
		return http.StatusOK, "application/json", string(b)
	})
	refused := startTokenServer(t, "", func(int, *http.Request) (int, string, string) {
		return http.StatusUnauthorized, "application/json", `{"error":"invalid_client","error_description":"` + tokenDesc + `"}`
	})
	newline := startTokenServer(t, "", func(int, *http.Request) (int, string, string) { return tokenJSON(tokenNL+"\n", 3600) })
	garbage := startTokenServer(t, "", func(int, *http.Request) (int, string, string) {
		return http.StatusOK, "application/json", "{" + garbageBody
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/token"
	ln.Close()

	oauth := func(url string) string {
		return fmt.Sprintf(`"oauth": {"token_url": %q, "client_id": "mux", "client_secret": "$CLIENT_SECRET"}`, url)
	}
	cfg := fmt.Sprintf(`{
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY", "mallory": "$MALLORY_KEY"}}},
	  "mcpServers": {
	    "st": {"type": "http", "url": %[1]q, "headers": {"X-Api-Key": "$STATIC"}, "headers_from_context": {"headers": {"X-Ctx": "ctx"}}},
	    "oa": {"type": "http", "url": %[2]q, %[3]s},
	    "rt": {"type": "http", "url": %[1]q, "oauth": {"token_url": %[4]q, "grant_type": "refresh_token", "refresh_token": "$REFRESH", "client_id": "mux", "client_secret": "$CLIENT_SECRET"}},
	    "refused": {"type": "http", "url": %[1]q, %[5]s},
	    "nl": {"type": "http", "url": %[1]q, %[6]s},
	    "garbage": {"type": "http", "url": %[1]q, %[7]s},
	    "down": {"type": "http", "url": %[1]q, %[8]s},
	    "ua": {"type": "http", "url": %[1]q, "user_auth": {"users": {"alice": "$USER_ALICE", "mallory": "$USER_MALLORY"}}}}}`,
		upA.url(), upB.url(), oauth(good.URL), refresher.URL, oauth(refused.URL), oauth(newline.URL), oauth(garbage.URL), oauth(downURL))
	m, _ := startMuxEnv(t, cfg, map[string]string{
		"ALICE_KEY": aliceKey, "BOB_KEY": bobKey, "MALLORY_KEY": malloryKey,
		"STATIC": static, "CLIENT_SECRET": clientSecret, "REFRESH": refresh,
		"USER_ALICE": "Bearer " + userAlice, "USER_MALLORY": "Bearer " + userBadNL + "\n",
	}, proxy.Options{})
	alice, aliceRT := connectAs(t, m.ts.URL, "Authorization", "Bearer "+aliceKey)
	bob, bobRT := connectAs(t, m.ts.URL, "Authorization", "Bearer "+bobKey)
	mallory, malloryRT := connectAs(t, m.ts.URL, "Authorization", "Bearer "+malloryKey)
	bg := context.Background()

	var echoes []string // successful echo results, excluded from the response check
	ok := func(ctx context.Context, who string, tool, wantSecret string) {
		t.Helper()
		cs := map[string]*mcp.ClientSession{"alice": alice, "bob": bob}[who]
		text, isErr := mustCall(t, ctx, cs, tool, nil)
		if isErr || !strings.Contains(text, wantSecret) {
			t.Fatalf("%s %s: isError=%v text=%q", who, tool, isErr, text)
		}
		echoes = append(echoes, text)
	}
	fail := func(ctx context.Context, cs *mcp.ClientSession, tool string) {
		t.Helper()
		text, isErr, err := call(ctx, cs, tool, nil)
		if err == nil && !isErr {
			t.Fatalf("%s succeeded: %q", tool, text)
		}
	}

	withCtx := withHeaders(bg, "X-Mux-Secrets", secretsJSON("ctx", ctxGood))
	ok(withCtx, "alice", "st_headers", ctxGood)
	ok(withCtx, "alice", "st_headers", static)
	fail(bg, alice, "st_headers")                                                                  // deny: missing key
	fail(withHeaders(bg, "X-Mux-Secrets", secretsJSON("ctx", ctxBad+"\r\n")), alice, "st_headers") // illegal value
	fail(withHeaders(bg, "X-Mux-Secrets", `{"ctx": "`+ctxMalformed+`"`), bob, "st_headers")        // 400

	ok(bg, "alice", "oa_headers", "sekrit-oauth-")
	// 401 from the upstream: one refresh, one retry.
	cur := parseEcho(echoes[len(echoes)-1])["authorization"][0]
	upB.revoke(cur)
	ok(bg, "alice", "oa_headers", "sekrit-oauth-")
	// refresh_token grant with rotation.
	ok(bg, "bob", "rt_headers", "sekrit-oauth-rt-")

	fail(bg, alice, "refused_headers")
	fail(bg, alice, "nl_headers")
	fail(bg, alice, "garbage_headers")
	fail(bg, alice, "down_headers")

	ok(bg, "alice", "ua_headers", userAlice)
	fail(bg, bob, "ua_headers")     // unmapped
	fail(bg, mallory, "ua_headers") // illegal value

	// Refused identities, and another user's session.
	for _, hdr := range []map[string]string{
		{"Authorization": "Bearer " + wrongKey},
		{"Authorization": "Bearer " + bobKey, "Mcp-Session-Id": alice.ID(), "X-Mux-Secrets": secretsJSON("ctx", ctxGood)},
		{"Authorization": "Bearer " + aliceKey, "X-Mux-Secrets": "{" + ctxMalformed},
	} {
		status, h, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", hdr, initializeBody)
		if status < 400 {
			t.Errorf("request %v was accepted", hdr)
		}
		if strings.Contains(body, "sekrit") || strings.Contains(fmt.Sprint(h), "sekrit") {
			t.Errorf("HTTP %d response leaks a secret: %v %s", status, h, body)
		}
	}

	// Readiness reports per-server errors; none of them carries a secret.
	if status, _, body := rawRequest(t, http.MethodGet, m.ts.URL+"/readyz", nil, ""); status != 200 || strings.Contains(body, "sekrit") {
		t.Errorf("/readyz: HTTP %d %s", status, body)
	}

	logs := m.logs.String()
	for _, want := range []string{"tool call failed", "discovering without credentials"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the failing paths were not logged (%q missing), so the log check proves little", want)
		}
	}
	if strings.Contains(logs, "sekrit") {
		for _, l := range strings.Split(logs, "\n") {
			if strings.Contains(l, "sekrit") {
				t.Errorf("log line leaks a secret: %s", l)
			}
		}
	}
	for who, rt := range map[string]*clientRT{"alice": aliceRT, "bob": bobRT, "mallory": malloryRT} {
		for _, body := range rt.responses() {
			for _, e := range echoes {
				b, _ := json.Marshal(e)
				body = strings.ReplaceAll(body, string(b[1:len(b)-1]), "")
			}
			if strings.Contains(body, "sekrit") {
				t.Errorf("a response to %s leaks a secret: %s", who, body)
			}
		}
	}
	if n := len(logs); n == 0 {
		t.Error("no logs captured")
	}
}

// A request refused before the SDK sees it (here: a malformed secrets
// carrier) is answered with its own id, so clients surface the message; an
// id that is not a string or a number is answered with null.
func TestRefusalAnswersTheRequestID(t *testing.T) {
	m := startMux(t, `{"mcpServers": {}}`, proxy.Options{})
	for _, c := range []struct{ id, want string }{
		{`42`, `"id":42`},
		{`"req-1"`, `"id":"req-1"`},
		{`null`, `"id":null`},
		{`true`, `"id":null`},
	} {
		body := `{"jsonrpc":"2.0","id":` + c.id + `,"method":"tools/list","params":{"meta":{"id":99}}}`
		status, _, got := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", map[string]string{"X-Mux-Secrets": "{not json"}, body)
		if status != http.StatusBadRequest || !strings.Contains(got, c.want) || !strings.Contains(got, "X-Mux-Secrets") {
			t.Errorf("id %s: HTTP %d %s, want 400 with %s naming the header", c.id, status, got, c.want)
		}
	}
}
