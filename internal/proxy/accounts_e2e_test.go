package proxy_test

// End-to-end tests of connected accounts (DESIGN §2.9, issue 35): a real
// authorization server (npm oauth2-mock-server, internal/oauthtest), a
// real protected MCP server (go-sdk behind auth.RequireBearerToken,
// checking each JWT against the server's JWKS), mcp-mux in between, and
// go-sdk clients whose URL elicitation handler is the user's browser.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/accounts"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/oauthtest"
	"github.com/mcp-mux/mcp-mux/internal/otlptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
)

const (
	acctClientID     = "mux-accounts-client"
	acctClientSecret = "sekrit-acct-client-secret-5b7d"
)

// acctMux is an mcp-mux whose inbound.public_url is its own URL, with
// api_keys alice and bob, the protected server "up" as a connected-account
// server (pre-registered client acctClientID), its accounts in a bbolt
// store.
func acctMux(t *testing.T, up *oauthtest.Resource, spans *otlptest.Receiver) *mux {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	publicURL := "http://" + ts.Listener.Addr().String()
	cfgJSON := fmt.Sprintf(`{"inbound": {"public_url": %q, "auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY"}}},
	  "mcpServers": {"up": {"type": "http", "url": %q,
	    "oauth": {"grant_type": "authorization_code", "client_id": %q, "client_secret": "$ACCT_SECRET"}}}}`, publicURL, up.URL(), acctClientID)
	env := map[string]string{"ALICE_KEY": aliceKey, "BOB_KEY": bobKey, "ACCT_SECRET": acctClientSecret}
	cfg, err := config.Parse([]byte(cfgJSON), config.LoadOptions{Filename: "test.json", LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil || len(cfg.Invalid) > 0 {
		t.Fatalf("config: %v %+v", err, cfg.Invalid)
	}
	store, err := accounts.OpenBoltStore(accounts.BoltOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	logs := &mcptest.LogBuffer{}
	opts := proxy.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true}),
		RetryMin: 20 * time.Millisecond, RetryMax: 200 * time.Millisecond, AccountStore: store}
	if spans != nil {
		opts.Telemetry = telemetry.Options{Enabled: true, Endpoint: spans.Endpoint(), Env: func(string) (string, bool) { return "", false }}
	}
	srv := proxy.New(opts)
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mux logs:\n%s", logs.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
		_ = store.Close()
	})
	return &mux{srv: srv, ts: ts, logs: logs}
}

// acctUser is one user's MCP client: its browser answers the consent
// elicitations (a URL-mode elicitation/create) by opening the URL signed
// in as the user.
type acctUser struct {
	name    string
	cs      *mcp.ClientSession
	browser *oauthtest.Browser

	mu       sync.Mutex
	asked    int      // URL elicitations answered
	pages    []string // the callback pages the browser ended on
	complete int      // notifications/elicitation/complete received
}

// connectAcctUser connects user's go-sdk client (api key key) at protocol
// version pv, declaring URL elicitation (url false: none at all).
func connectAcctUser(t *testing.T, muxURL, name, key, pv string, withURL bool) *acctUser {
	t.Helper()
	u := &acctUser{name: name, browser: oauthtest.NewBrowser(t, name)}
	opts := &mcp.ClientOptions{}
	if withURL {
		opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
		opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode != "url" || req.Params.URL == "" {
				return nil, fmt.Errorf("%s: unexpected elicitation %+v", name, req.Params)
			}
			status, page, err := u.browser.Open(ctx, req.Params.URL)
			u.mu.Lock()
			u.asked++
			u.pages = append(u.pages, page)
			u.mu.Unlock()
			if err != nil || status != http.StatusOK {
				return nil, fmt.Errorf("%s's browser: HTTP %d %v: %s", name, status, err, page)
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		}
		opts.ElicitationCompleteHandler = func(context.Context, *mcp.ElicitationCompleteNotificationRequest) {
			u.mu.Lock()
			u.complete++
			u.mu.Unlock()
		}
	}
	rt := &clientRT{static: http.Header{"Authorization": {"Bearer " + key}}}
	c := mcp.NewClient(&mcp.Implementation{Name: name + "-client", Version: "1"}, opts)
	sopts := &mcp.ClientSessionOptions{}
	if pv != "" {
		sopts.ProtocolVersion = pv
	}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: muxURL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, sopts)
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	u.cs = cs
	return u
}

// consents returns how many consents the user's browser completed.
func (u *acctUser) consents() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.asked
}

// whoami calls the protected server's whoami through the mux.
func (u *acctUser) whoami(ctx context.Context) (oauthtest.Identity, error) {
	text, isErr, err := call(ctx, u.cs, "up_whoami", nil)
	if err != nil {
		return oauthtest.Identity{}, err
	}
	if isErr {
		return oauthtest.Identity{}, fmt.Errorf("tool error: %s", text)
	}
	var id oauthtest.Identity
	if err := json.Unmarshal([]byte(text), &id); err != nil {
		return id, fmt.Errorf("whoami answered %q", text)
	}
	return id, nil
}

// waitTool waits until the user's catalog lists name.
func waitTool(t *testing.T, cs *mcp.ClientSession, name string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		for _, n := range toolNames(t, cs) {
			if n == name {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never listed: %v", name, toolNames(t, cs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConnectedAccountsTwoUsers (issue 35): alice and bob (api keys) each
// consent once — alice on demand with connect_account, bob inside his
// first call — through a real authorization server; every call of each
// reaches the protected server with that user's own token (the server
// sees their subject, never the other's), also when 40 calls run at once;
// bob's disconnect makes his next call ask again while alice is not
// asked; and a token whose lifetime is below the refresh margin is
// refreshed before it expires, the server never refusing one.
func TestConnectedAccountsTwoUsers(t *testing.T) {
	as := oauthtest.StartAS(t, oauthtest.ASOptions{ClientID: acctClientID, ClientSecret: acctClientSecret})
	up := oauthtest.StartResource(t, as)
	spans := otlptest.Start(t)
	m := acctMux(t, up, spans)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	alice := connectAcctUser(t, m.ts.URL, "alice", aliceKey, "2025-11-25", true)
	text, isErr := mustCall(t, ctx, alice.cs, "connect_account", map[string]any{"server": "up"})
	if isErr || !strings.Contains(text, "is connected") {
		t.Fatalf("connect_account: %q (error %v)", text, isErr)
	}
	if alice.consents() != 1 || !strings.Contains(alice.pages[0], "Connected up") {
		t.Fatalf("alice consented %d times, page %q", alice.consents(), alice.pages)
	}
	// The consent's elicitation is completed by the mux's
	// notifications/elicitation/complete.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		alice.mu.Lock()
		n := alice.complete
		alice.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice got %d notifications/elicitation/complete; want 1", n)
		}
	}
	// The per-user server's tools are discovered with alice's token.
	waitTool(t, alice.cs, "up_whoami")

	bob := connectAcctUser(t, m.ts.URL, "bob", bobKey, "2025-11-25", true)
	for i := range 3 {
		for _, u := range []*acctUser{alice, bob} {
			id, err := u.whoami(ctx)
			if err != nil {
				t.Fatalf("%s's call %d: %v", u.name, i, err)
			}
			if id.Sub != u.name {
				t.Fatalf("%s's call %d reached the server as %q", u.name, i, id.Sub)
			}
		}
	}
	if alice.consents() != 1 || bob.consents() != 1 {
		t.Fatalf("consents: alice %d, bob %d; want one each", alice.consents(), bob.consents())
	}
	// 40 calls at once, 20 each.
	var wg sync.WaitGroup
	var wrong atomic.Int32
	for i := range 40 {
		u := []*acctUser{alice, bob}[i%2]
		wg.Go(func() {
			id, err := u.whoami(ctx)
			if err != nil || id.Sub != u.name {
				wrong.Add(1)
				t.Errorf("%s's concurrent call: %+v %v", u.name, id, err)
			}
		})
	}
	wg.Wait()
	calls := up.Calls()
	if len(calls) != 2 || calls["alice"] != 23 || calls["bob"] != 23 {
		t.Fatalf("the server saw %v; want alice 23 and bob 23 and nobody else", calls)
	}
	st := as.Stats(t)
	if st.AuthorizationCode != 2 || st.RefreshToken != 0 || st.PKCES256 != 2 || st.Resource != 2 || st.ClientBad != 0 {
		t.Fatalf("authorization server: %+v; want 2 codes exchanged with S256 PKCE and the resource, no refresh", st)
	}
	if withTok, _ := up.Refused(); withTok != 0 {
		t.Fatalf("the server refused %d tokens", withTok)
	}

	// bob disconnects: his next call asks him again; alice is not asked.
	text, isErr = mustCall(t, ctx, bob.cs, "connect_account", map[string]any{"server": "up", "disconnect": true})
	if isErr || !strings.Contains(text, "disconnected") {
		t.Fatalf("disconnect: %q (error %v)", text, isErr)
	}
	// From here tokens live 30 s, under the mux's 60 s refresh margin:
	// each use refreshes first.
	as.SetTokenTTL(t, 30*time.Second)
	id, err := bob.whoami(ctx)
	if err != nil || id.Sub != "bob" {
		t.Fatalf("bob after disconnecting: %+v %v", id, err)
	}
	if bob.consents() != 2 || alice.consents() != 1 {
		t.Fatalf("consents after bob's disconnect: alice %d, bob %d; want 1 and 2", alice.consents(), bob.consents())
	}
	if id, err := alice.whoami(ctx); err != nil || id.Sub != "alice" {
		t.Fatalf("alice after bob's disconnect: %+v %v", id, err)
	}

	// Refresh before expiry: each of bob's calls finds his token due and
	// refreshes it while it is still valid; the server never sees an
	// expired one.
	before := as.Stats(t)
	prev := id
	for i := range 3 {
		if time.Now().Unix() >= prev.Exp {
			t.Fatalf("the previous token expired already (exp %d)", prev.Exp)
		}
		id, err := bob.whoami(ctx)
		if err != nil || id.Sub != "bob" {
			t.Fatalf("bob's call %d: %+v %v", i, id, err)
		}
		if id.JTI == prev.JTI {
			t.Fatalf("bob's call %d went out with the token of the call before (jti %s): not refreshed", i, id.JTI)
		}
		prev = id
	}
	after := as.Stats(t)
	if got := after.RefreshToken - before.RefreshToken; got != 3 || after.AuthorizationCode != before.AuthorizationCode || after.Refused != 0 {
		t.Fatalf("authorization server: %d refreshes during bob's 3 calls (want 3), %+v", got, after)
	}
	if withTok, _ := up.Refused(); withTok != 0 {
		t.Fatalf("the server refused %d tokens: one was not refreshed in time", withTok)
	}
	t.Logf("authorization server: %+v; server calls %v", after, up.Calls())
	acctNoSecrets(t, m, spans, as, alice, bob)
}

// acctNoSecrets checks that no code, PKCE verifier, access or refresh
// token the authorization server saw, no state and not the client secret
// is in the mux's log (trace level), its /metrics, its status or the spans
// it exported.
func acctNoSecrets(t *testing.T, m *mux, spans *otlptest.Receiver, as *oauthtest.AS, users ...*acctUser) {
	t.Helper()
	secrets := append(as.Secrets(t), acctClientSecret)
	states := 0
	for _, u := range users {
		for _, v := range u.browser.Visited() {
			if pu, err := url.Parse(v); err == nil && pu.Path == "/oauth/callback" && pu.Query().Get("state") != "" {
				secrets = append(secrets, pu.Query().Get("state"))
				states++
			}
		}
	}
	resp, err := testHTTP.Get(m.ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	status, _ := json.Marshal(m.srv.Status())
	exported := spans.WaitSpans(t, 20*time.Second, func(all []otlptest.Span) bool { return len(all) > 0 })
	sources := map[string]string{"log": m.logs.String(), "/metrics": string(metrics), "status": string(status), "spans": otlptest.Dump(exported)}
	for name, text := range sources {
		for _, sec := range secrets {
			if i := strings.Index(text, sec); i >= 0 || strings.Contains(text, url.QueryEscape(sec)) {
				t.Errorf("the mux's %s holds a secret (%.12s…) at %d", name, sec, i)
			}
		}
	}
	t.Logf("looked for %d secrets (%d states) in the log (%d bytes), /metrics, the status and %d spans", len(secrets), states, len(sources["log"]), len(exported))
}

// TestConnectedAccountsCallbackAttacks (issue 35), through mux's real
// /oauth/callback: a replayed callback URL is refused with 400 and
// exchanges nothing; a callback carrying alice's state with bob's code is
// refused (the authorization server checks the code against alice's PKCE
// verifier), connects nobody, and spends both alice's state and bob's code. The consents are started by clients that
// cannot show a URL: their calls fail with -32042 carrying the URL.
func TestConnectedAccountsCallbackAttacks(t *testing.T) {
	as := oauthtest.StartAS(t, oauthtest.ASOptions{ClientID: acctClientID, ClientSecret: acctClientSecret})
	up := oauthtest.StartResource(t, as)
	m := acctMux(t, up, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := connectAcctUser(t, m.ts.URL, "alice", aliceKey, "2025-11-25", false)
	bob := connectAcctUser(t, m.ts.URL, "bob", bobKey, "2025-11-25", false)

	// consentURL starts u's consent: the -32042 error's URL.
	consentURL := func(u *acctUser) string {
		t.Helper()
		_, err := u.cs.CallTool(ctx, &mcp.CallToolParams{Name: "connect_account", Arguments: map[string]any{"server": "up"}})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != -32042 {
			t.Fatalf("%s's connect_account without URL elicitation: %v; want -32042", u.name, err)
		}
		var data struct {
			Elicitations []mcp.ElicitParams `json:"elicitations"`
		}
		if err := json.Unmarshal(je.Data, &data); err != nil || len(data.Elicitations) != 1 || data.Elicitations[0].URL == "" {
			t.Fatalf("-32042 data %s: %v", je.Data, err)
		}
		return data.Elicitations[0].URL
	}
	connected := func(u *acctUser) bool {
		t.Helper()
		_, err := u.cs.CallTool(ctx, &mcp.CallToolParams{Name: "connect_account", Arguments: map[string]any{"server": "up"}})
		if err == nil {
			return true
		}
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != -32042 {
			t.Fatalf("%s's connect_account: %v", u.name, err)
		}
		return false
	}

	// Replay: alice completes her consent, then the same callback URL again.
	cb, err := alice.browser.Authorize(ctx, consentURL(alice))
	if err != nil || !strings.HasPrefix(cb, m.ts.URL+"/oauth/callback?") {
		t.Fatalf("authorize: %q %v", cb, err)
	}
	if status, page, err := alice.browser.Get(ctx, cb); err != nil || status != http.StatusOK {
		t.Fatalf("alice's callback: HTTP %d %v %s", status, err, page)
	}
	first := as.Stats(t)
	status, page, err := alice.browser.Get(ctx, cb)
	if err != nil || status != http.StatusBadRequest || !strings.Contains(page, "already used") {
		t.Fatalf("replayed callback: HTTP %d %v %s; want 400", status, err, page)
	}
	if st := as.Stats(t); st.AuthorizationCode != first.AuthorizationCode || st.Refused != first.Refused || st.ClientOK != first.ClientOK {
		t.Fatalf("the replay reached the token endpoint: %+v then %+v", first, st)
	}
	if !connected(alice) {
		t.Fatal("alice is not connected after her consent")
	}

	// alice disconnects and starts again; bob starts too. A callback with
	// alice's state and bob's code is refused: the code was bound to bob's
	// PKCE challenge, not alice's verifier.
	mustCall(t, ctx, alice.cs, "connect_account", map[string]any{"server": "up", "disconnect": true})
	aliceCB, err := alice.browser.Authorize(ctx, consentURL(alice))
	if err != nil {
		t.Fatal(err)
	}
	bobCB, err := bob.browser.Authorize(ctx, consentURL(bob))
	if err != nil {
		t.Fatal(err)
	}
	au, _ := url.Parse(aliceCB)
	bu, _ := url.Parse(bobCB)
	mixed := *au
	q := au.Query()
	q.Set("code", bu.Query().Get("code"))
	mixed.RawQuery = q.Encode()
	before := as.Stats(t)
	status, page, err = alice.browser.Get(ctx, mixed.String())
	if err != nil || status != http.StatusBadRequest || !strings.Contains(page, "Could not connect up") || !strings.Contains(page, "code exchange was refused") {
		t.Fatalf("alice's state with bob's code: HTTP %d %v %s; want 400, the exchange refused", status, err, page)
	}
	if st := as.Stats(t); st.AuthorizationCode != before.AuthorizationCode {
		t.Fatalf("a token was issued for bob's code under alice's state: %+v", st)
	}
	if connected(alice) || connected(bob) {
		t.Fatal("the mixed callback connected an account")
	}
	// alice's own state is spent: her real callback is refused as well.
	if status, _, _ := alice.browser.Get(ctx, aliceCB); status != http.StatusBadRequest {
		t.Fatalf("alice's spent state: HTTP %d; want 400", status)
	}
	// bob's code was spent by the attempt (the authorization server
	// checked it against alice's verifier): his own callback fails too.
	if status, page, _ := bob.browser.Get(ctx, bobCB); status != http.StatusBadRequest || !strings.Contains(page, "code exchange was refused") {
		t.Fatalf("bob's callback after his code was tried: HTTP %d %s; want 400", status, page)
	}
	if connected(bob) {
		t.Fatal("bob is connected with a spent code")
	}
	if calls := up.Calls(); len(calls) != 0 {
		t.Fatalf("the server saw calls %v", calls)
	}
}
