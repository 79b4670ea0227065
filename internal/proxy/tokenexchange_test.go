package proxy_test

// End-to-end tests of token_exchange: a real RFC 8693 token endpoint, a
// real upstream MCP server echoing the Authorization it got.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

const (
	xchgSecret     = "sekrit-xchg-client-9f8e"
	xchgAudience   = "https://api.example"
	xchgScope      = "files:read"
	grantExchange  = "urn:ietf:params:oauth:grant-type:token-exchange"
	typeAccess     = "urn:ietf:params:oauth:token-type:access_token"
	typeJWT        = "urn:ietf:params:oauth:token-type:jwt"
	aliceSubject   = "sekrit-subject-alice-1a2b"
	bobSubject     = "sekrit-subject-bob-3c4d"
	refusedSubject = "sekrit-subject-refused-5e6f"
)

// exchangeEndpoint is a token endpoint that checks RFC 8693's fields and
// the client's Basic credentials, refuses refusedSubject with invalid_grant
// (quoting it in the description, which must go no further), and issues
// "sekrit-xchg-<n>" tokens valid for life seconds. subjects records the
// subject token of each request.
func exchangeEndpoint(t *testing.T, subjectType string, life int) (*tokenServer, *[]string) {
	var mu sync.Mutex
	var subjects []string
	ts := startTokenServer(t, "", func(n int, r *http.Request) (int, string, string) {
		f := r.PostForm
		mu.Lock()
		subjects = append(subjects, f.Get("subject_token"))
		mu.Unlock()
		user, pass, basic := r.BasicAuth()
		if f.Get("grant_type") != grantExchange || f.Get("subject_token_type") != subjectType ||
			f.Get("audience") != xchgAudience || f.Get("scope") != xchgScope || f.Get("requested_token_type") != typeAccess ||
			f.Get("subject_token") == "" || !basic || user != "mux" || pass != xchgSecret {
			t.Errorf("token exchange request %d: form %v, basic %v %q", n, f, basic, user)
			return http.StatusBadRequest, "application/json", `{"error":"invalid_request"}`
		}
		if f.Get("subject_token") == refusedSubject {
			return http.StatusBadRequest, "application/json", `{"error":"invalid_grant","error_description":"subject ` + refusedSubject + ` expired"}`
		}
		b, _ := json.Marshal(map[string]any{"access_token": fmt.Sprintf("sekrit-xchg-%d", n), "token_type": "N_A",
			"issued_token_type": typeAccess, "expires_in": life})
		return http.StatusOK, "application/json", string(b)
	})
	return ts, &subjects
}

// exchangeServer is the "up" server with a token_exchange block against tok.
func exchangeServer(up *echoUpstream, tok *tokenServer, extra string) string {
	return fmt.Sprintf(`"mcpServers": {"up": {"type": "http", "url": %q, "session_scope": "shared",
	  "headers": {"Authorization": "Bearer static-loses"},
	  "token_exchange": {"token_url": %q, "client_id": "mux", "client_secret": "$XCHG_SECRET", "auth_style": "basic",
	    "audience": %q, "scope": %q %s}}}`, up.url(), tok.URL+"/token", xchgAudience, xchgScope, extra)
}

// upstreamCalls counts the tools/call requests the upstream received.
func upstreamCalls(up *echoUpstream) int {
	up.mu.Lock()
	defer up.mu.Unlock()
	n := 0
	for _, c := range up.conns {
		n += strings.Count(c.String(), `"method":"tools/call"`)
	}
	return n
}

// TestTokenExchange: each api_keys caller's own token (X-User-Token) is
// exchanged once for the token its calls carry upstream, callers never
// share a token or an upstream session, a refused exchange and a missing
// token are tool errors naming the server that reach no upstream, and no
// subject token, client secret or exchanged token is in a log line or in a
// response other than the upstream's echo of its own header.
func TestTokenExchange(t *testing.T) {
	up := startEchoUpstream(t, "up")
	tok, subjects := exchangeEndpoint(t, typeAccess, 3600)
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY", "carol": "$CAROL_KEY"}}}, %s}`,
		exchangeServer(up, tok, `, "subject_header": "X-User-Token"`))
	m, _ := startMuxEnv(t, cfg, map[string]string{"ALICE_KEY": aliceKey, "BOB_KEY": bobKey, "CAROL_KEY": carolKey, "XCHG_SECRET": xchgSecret}, proxy.Options{})
	alice, aliceRT := connectAs(t, m.ts.URL, "Authorization", "Bearer "+aliceKey, "X-User-Token", "Bearer "+aliceSubject)
	bob, bobRT := connectAs(t, m.ts.URL, "Authorization", "Bearer "+bobKey, "X-User-Token", bobSubject)
	bg := context.Background()

	got := map[string]string{}
	sessions := map[string]string{}
	for range 3 {
		for user, cs := range map[string]*mcp.ClientSession{"alice": alice, "bob": bob} {
			h := echoHeaders(t, bg, cs, "up_headers")
			auth := h["authorization"]
			if len(auth) != 1 || !strings.HasPrefix(auth[0], "Bearer sekrit-xchg-") {
				t.Fatalf("%s's call reached the upstream with Authorization %q, want an exchanged token", user, auth)
			}
			if prev, ok := got[user]; ok && prev != auth[0] {
				t.Errorf("%s's token changed within its lifetime: %q then %q", user, prev, auth[0])
			}
			got[user] = auth[0]
			if sid := strings.Join(h["mcp-session-id"], ","); sessions[user] == "" {
				sessions[user] = sid
			}
		}
	}
	if got["alice"] == got["bob"] {
		t.Errorf("alice and bob got the same upstream token %q", got["alice"])
	}
	if sessions["alice"] == sessions["bob"] {
		t.Errorf("alice and bob shared upstream session %q", sessions["alice"])
	}
	if n := tok.hits.Load(); n != 2 {
		t.Errorf("token endpoint hits = %d after 6 calls by 2 callers, want 2", n)
	}
	if s := strings.Join(*subjects, ","); s != aliceSubject+","+bobSubject && s != bobSubject+","+aliceSubject {
		t.Errorf("subject tokens exchanged: %s", s)
	}

	// A refused exchange: a tool error naming the server and the error code; no upstream call.
	refused, refusedRT := connectAs(t, m.ts.URL, "Authorization", "Bearer "+carolKey, "X-User-Token", "Bearer "+refusedSubject)
	before := upstreamCalls(up)
	text, isErr := mustCall(t, bg, refused, "up_headers", nil)
	want := fmt.Sprintf("MCP server 'up': token exchange endpoint %s/token refused the request (HTTP 400): invalid_grant", tok.URL)
	if !isErr || text != want {
		t.Errorf("refused exchange: isError=%v %q, want %q", isErr, text, want)
	}
	// No caller token: a tool error naming the server and the header.
	missing, missingRT := connectAs(t, m.ts.URL, "Authorization", "Bearer "+carolKey)
	text, isErr = mustCall(t, bg, missing, "up_headers", nil)
	if !isErr || !strings.HasPrefix(text, "MCP server 'up': token exchange needs the caller's token in the X-User-Token request header") {
		t.Errorf("missing subject: isError=%v %q", isErr, text)
	}
	if n := upstreamCalls(up) - before; n != 0 {
		t.Errorf("%d calls reached the upstream after a failed exchange", n)
	}

	secrets := []string{aliceSubject, bobSubject, refusedSubject, xchgSecret, "sekrit-xchg-"}
	if logs := m.logs.String(); logs == "" {
		t.Fatal("no logs captured")
	} else {
		for _, s := range secrets {
			if strings.Contains(logs, s) {
				t.Errorf("a log line contains %q", s)
			}
		}
	}
	for who, rt := range map[string]*clientRT{"alice": aliceRT, "bob": bobRT, "refused": refusedRT, "missing": missingRT} {
		for _, body := range rt.responses() {
			for _, s := range secrets[:4] {
				if strings.Contains(body, s) {
					t.Errorf("a response to %s contains %q", who, s)
				}
			}
			if (who == "refused" || who == "missing") && strings.Contains(body, "sekrit-xchg-") {
				t.Errorf("a response to %s contains an exchanged token", who)
			}
		}
	}
}

// TestTokenExchangeRefresh: with a 3 s token and a 1 s skew, the token is
// exchanged again before it expires, and no call fails.
func TestTokenExchangeRefresh(t *testing.T) {
	up := startEchoUpstream(t, "up")
	tok, _ := exchangeEndpoint(t, typeAccess, 3)
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "trusted_header"}}, %s}`,
		exchangeServer(up, tok, `, "subject_header": "X-User-Token", "refresh_skew_seconds": 1`))
	m, _ := startMuxEnv(t, cfg, map[string]string{"XCHG_SECRET": xchgSecret}, proxy.Options{})
	cs, _ := connectAs(t, m.ts.URL, "X-Mux-User", "alice", "X-User-Token", aliceSubject)
	bg := context.Background()

	first := echoHeaders(t, bg, cs, "up_headers")["authorization"]
	second := echoHeaders(t, bg, cs, "up_headers")["authorization"]
	if len(first) != 1 || first[0] != "Bearer sekrit-xchg-1" || second[0] != first[0] || tok.hits.Load() != 1 {
		t.Fatalf("within the token's life: %q then %q, %d exchanges", first, second, tok.hits.Load())
	}
	time.Sleep(2200 * time.Millisecond) // past expiry - skew (2 s), before expiry (3 s)
	got := echoHeaders(t, bg, cs, "up_headers")["authorization"]
	if len(got) != 1 || got[0] != "Bearer sekrit-xchg-2" || tok.hits.Load() != 2 {
		t.Fatalf("after the skew: %q, %d exchanges; want a fresh token from exchange 2", got, tok.hits.Load())
	}
}

// TestTokenExchangeJWT: in jwt mode the verified bearer JWT itself is the
// subject token; two callers each get their own exchanged token.
func TestTokenExchangeJWT(t *testing.T) {
	up := startEchoUpstream(t, "up")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"}}})
	}))
	t.Cleanup(jwks.Close)
	const issuer, audience = "https://idp.example", "mcp-mux-test"
	sign := func(sub string) string {
		sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
		if err != nil {
			t.Fatal(err)
		}
		c := jwt.Claims{Issuer: issuer, Audience: jwt.Audience{audience}, Subject: sub, Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
		tok, err := jwt.Signed(sig).Claims(c).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	tok, subjects := exchangeEndpoint(t, typeJWT, 3600)
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "jwt", "jwks_url": %q, "issuer": %q, "audience": %q}}, %s}`,
		jwks.URL, issuer, audience, exchangeServer(up, tok, fmt.Sprintf(`, "subject_token_type": %q`, typeJWT)))
	m, _ := startMuxEnv(t, cfg, map[string]string{"XCHG_SECRET": xchgSecret}, proxy.Options{})
	aliceJWT, bobJWT := sign("alice"), sign("bob")
	alice, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+aliceJWT)
	bob, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+bobJWT)
	bg := context.Background()
	a := echoHeaders(t, bg, alice, "up_headers")["authorization"]
	b := echoHeaders(t, bg, bob, "up_headers")["authorization"]
	echoHeaders(t, bg, alice, "up_headers")
	if len(a) != 1 || len(b) != 1 || a[0] == b[0] || !strings.HasPrefix(a[0], "Bearer sekrit-xchg-") || !strings.HasPrefix(b[0], "Bearer sekrit-xchg-") {
		t.Fatalf("upstream Authorization: alice %q, bob %q", a, b)
	}
	if n := tok.hits.Load(); n != 2 || (*subjects)[0] != aliceJWT || (*subjects)[1] != bobJWT {
		t.Fatalf("%d exchanges, subjects %d; want 2, the callers' JWTs", n, len(*subjects))
	}
	for _, s := range []string{aliceJWT, bobJWT, xchgSecret, "sekrit-xchg-"} {
		if strings.Contains(m.logs.String(), s) {
			t.Errorf("a log line contains a token or secret (%.16s…)", s)
		}
	}
}
