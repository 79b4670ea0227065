package replicaset_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/oauthtest"
	"github.com/mcp-mux/mcp-mux/internal/replicaset"
)

const (
	acctClientID     = "mux-replicas-client"
	acctClientSecret = "sekrit-marker-client-secret-3f9a1c"
	acctAliceKey     = "sekrit-marker-alice-key-77c2"
	acctBobKey       = "sekrit-marker-bob-key-19e4"
)

// rrBalancer is a round-robin balancer in front of the replicas, in Go so
// the test knows where each request went: it records the replica of each
// tools/call and sends each /oauth/callback (the browser coming back) to a
// replica other than the one that took the latest tools/call.
type rrBalancer struct {
	ts *httptest.Server
	tr *http.Transport

	mu        sync.Mutex
	backends  []*url.URL
	next      int
	lastCall  int
	calls     []int // replica of each tools/call
	callbacks []int // replica of each /oauth/callback
	served    []int // requests per replica
}

func startRRBalancer(t *testing.T) *rrBalancer {
	b := &rrBalancer{tr: &http.Transport{}, lastCall: -1}
	proxy := &httputil.ReverseProxy{Transport: b.tr, FlushInterval: -1, Rewrite: func(r *httputil.ProxyRequest) {
		i := r.In.Context().Value(backendKey{}).(int)
		b.mu.Lock()
		target := b.backends[i]
		b.mu.Unlock()
		r.SetURL(target)
		r.Out.Host = r.In.Host
	}}
	b.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		isCall := false
		if r.Method == http.MethodPost && r.Body != nil {
			body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			isCall = bytes.Contains(body, []byte(`"method":"tools/call"`))
		}
		b.mu.Lock()
		if len(b.backends) == 0 {
			b.mu.Unlock()
			http.Error(w, "no backends yet", http.StatusServiceUnavailable)
			return
		}
		i := b.next % len(b.backends)
		b.next++
		if r.URL.Path == "/oauth/callback" {
			if i == b.lastCall {
				i = (i + 1) % len(b.backends)
			}
			b.callbacks = append(b.callbacks, i)
		}
		if isCall {
			b.lastCall = i
			b.calls = append(b.calls, i)
		}
		b.served[i]++
		b.mu.Unlock()
		proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), backendKey{}, i)))
	}))
	t.Cleanup(func() {
		b.ts.CloseClientConnections()
		b.ts.Close()
		b.tr.CloseIdleConnections()
	})
	return b
}

type backendKey struct{}

func (b *rrBalancer) setBackends(addrs []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range addrs {
		b.backends = append(b.backends, &url.URL{Scheme: "http", Host: a})
	}
	b.served = make([]int, len(addrs))
}

// snapshot returns the replicas of the tool calls and callbacks so far.
func (b *rrBalancer) snapshot() (calls, callbacks, served []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.calls...), append([]int(nil), b.callbacks...), append([]int(nil), b.served...)
}

// acctClient is a user's go-sdk client through the balancer whose URL
// elicitations its browser answers.
type acctClient struct {
	name    string
	cs      *mcp.ClientSession
	tr      *http.Transport
	browser *oauthtest.Browser

	mu      sync.Mutex
	asked   int
	lastErr error // the browser's last failure
}

type keyRT struct {
	key  string
	base http.RoundTripper
}

func (k keyRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+k.key)
	return k.base.RoundTrip(r)
}

func connectAcct(t *testing.T, ctx context.Context, endpoint, name, key, pv string) *acctClient {
	t.Helper()
	c := &acctClient{name: name, tr: &http.Transport{}, browser: oauthtest.NewBrowser(t, name)}
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			if req.Params.Mode != "url" {
				return nil, fmt.Errorf("unexpected elicitation %+v", req.Params)
			}
			status, page, err := c.browser.Open(ctx, req.Params.URL)
			c.mu.Lock()
			c.asked++
			c.mu.Unlock()
			if err != nil || status != http.StatusOK {
				err = fmt.Errorf("%s's browser: HTTP %d %v: %s", name, status, err, page)
				c.mu.Lock()
				c.lastErr = err
				c.mu.Unlock()
				return nil, err
			}
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	opts := &mcp.ClientSessionOptions{}
	if pv != "" {
		opts.ProtocolVersion = pv
	}
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: keyRT{key, c.tr}}}, opts)
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	c.cs = cs
	t.Cleanup(func() {
		_ = cs.Close()
		c.tr.CloseIdleConnections()
	})
	return c
}

func (c *acctClient) consents() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked
}

func (c *acctClient) text(ctx context.Context, name string, args map[string]any) (string, error) {
	res, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, ct := range res.Content {
		if tc, ok := ct.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("tool error: %s", b.String())
	}
	return b.String(), nil
}

func (c *acctClient) whoami(ctx context.Context) (string, error) {
	text, err := c.text(ctx, "up_whoami", nil)
	if err != nil {
		return "", err
	}
	var id oauthtest.Identity
	if err := json.Unmarshal([]byte(text), &id); err != nil {
		return "", fmt.Errorf("whoami: %q", text)
	}
	return id.Sub, nil
}

// TestConnectedAccountsAcrossReplicas (issue 35): three mcp-mux replicas
// sharing Redis behind a round-robin balancer whose address is
// inbound.public_url. Each consent's callback lands on a replica other
// than the one that took the call asking for it, and the call completes:
// a 2025-11-25 client's connect_account, held live on its replica, and a
// 2026-07-28 client's whoami, whose retry goes on wherever it lands; then
// a 2025-11-25 whoami asking again after a disconnect. Every call carries
// its user's own token. Run with a known client secret, api keys and every
// code, verifier and token the authorization server saw: none of them, nor
// any state, is in a replica's log (trace level), the audit file, /metrics
// or the status page.
func TestConnectedAccountsAcrossReplicas(t *testing.T) {
	as := oauthtest.StartAS(t, oauthtest.ASOptions{ClientID: acctClientID, ClientSecret: acctClientSecret})
	up := oauthtest.StartResource(t, as)
	lb := startRRBalancer(t)
	auditPath := filepath.Join(t.TempDir(), "audit.jsonl")
	cfg := fmt.Sprintf(`{"inbound": {"public_url": %q, "auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY"}}},
	  "telemetry": {"audit": {"enabled": true, "output": %q, "detail": "full"}},
	  "mcpServers": {"up": {"type": "http", "url": %q,
	    "oauth": {"grant_type": "authorization_code", "client_id": %q, "client_secret": "$ACCT_SECRET"}}}}`, lb.ts.URL, auditPath, up.URL(), acctClientID)
	set := replicaset.Start(t, replicaset.Options{Binary: muxBin, Replicas: 3, Config: cfg, Args: []string{"--log-level", "trace"},
		Env: []string{"ALICE_KEY=" + acctAliceKey, "BOB_KEY=" + acctBobKey, "ACCT_SECRET=" + acctClientSecret}})
	addrs := make([]string, set.Len())
	for i := range addrs {
		addrs[i] = set.Replica(i).Addr()
	}
	lb.setBackends(addrs)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	endpoint := lb.ts.URL + "/mcp"

	// crossed checks that the latest consent's callback went to a replica
	// other than the call that asked for it.
	checked := 0
	crossed := func(what string) {
		t.Helper()
		calls, callbacks, _ := lb.snapshot()
		if len(callbacks) != checked+1 {
			t.Fatalf("%s: %d callbacks so far, want %d", what, len(callbacks), checked+1)
		}
		checked++
		t.Logf("%s: tool calls on replicas %v, callback on replica %d", what, calls, callbacks[len(callbacks)-1])
	}

	// alice, 2025-11-25: connect_account waits on its replica for the
	// callback that lands on another.
	alice := connectAcct(t, ctx, endpoint, "alice", acctAliceKey, "2025-11-25")
	text, err := alice.text(ctx, "connect_account", map[string]any{"server": "up"})
	if err != nil || !strings.Contains(text, "is connected") || alice.consents() != 1 {
		t.Fatalf("alice's connect_account: %q %v (consents %d, browser %v)", text, err, alice.consents(), alice.lastErr)
	}
	crossed("alice (2025-11-25, connect_account)")
	calls, callbacks, _ := lb.snapshot()
	if callbacks[0] == calls[0] {
		t.Fatalf("the callback landed on the replica holding the call (%d)", calls[0])
	}

	// Each replica discovers up with alice's token (after its backoff).
	waitListed(t, ctx, alice, set.Len())

	// bob, 2026-07-28: whoami answers input_required; the browser's
	// callback lands on a replica other than that call's; the retry
	// completes on whichever replica takes it.
	bob := connectAcct(t, ctx, endpoint, "bob", acctBobKey, "")
	if ir := bob.cs.InitializeResult(); ir == nil || ir.ProtocolVersion != "2026-07-28" {
		t.Fatalf("bob's client negotiated %+v; want 2026-07-28", ir)
	}
	before, _, _ := lb.snapshot()
	if sub, err := bob.whoami(ctx); err != nil || sub != "bob" || bob.consents() != 1 {
		t.Fatalf("bob's first call: %q %v (consents %d)", sub, err, bob.consents())
	}
	crossed("bob (2026-07-28, whoami)")
	calls, callbacks, _ = lb.snapshot()
	if first := calls[len(before)]; callbacks[1] == first || len(calls)-len(before) < 2 {
		t.Fatalf("bob: the call that asked ran on replica %d, the callback on %d, calls %v", first, callbacks[1], calls[len(before):])
	}

	// Round robin: every replica serves both users' calls with their own
	// tokens.
	for i := range 6 {
		for _, c := range []*acctClient{alice, bob} {
			if sub, err := c.whoami(ctx); err != nil || sub != c.name {
				t.Fatalf("%s's call %d: %q %v", c.name, i, sub, err)
			}
		}
	}

	// alice disconnects; her next whoami (2025-11-25) asks again inside the
	// call, held on its replica while the callback lands on another.
	if text, err := alice.text(ctx, "connect_account", map[string]any{"server": "up", "disconnect": true}); err != nil || !strings.Contains(text, "disconnected") {
		t.Fatalf("alice's disconnect: %q %v", text, err)
	}
	before, _, _ = lb.snapshot()
	if sub, err := alice.whoami(ctx); err != nil || sub != "alice" || alice.consents() != 2 {
		t.Fatalf("alice after disconnecting: %q %v (consents %d)", sub, err, alice.consents())
	}
	crossed("alice (2025-11-25, whoami after disconnect)")
	calls, callbacks, served := lb.snapshot()
	if callbacks[2] == calls[len(before)] {
		t.Fatalf("alice's second callback landed on the replica holding the call (%d)", callbacks[2])
	}
	for i, n := range served {
		if n == 0 {
			t.Errorf("replica %d served nothing: %v", i, served)
		}
	}
	if got := up.Calls(); len(got) != 2 || got["alice"] < 7 || got["bob"] < 7 {
		t.Fatalf("the server saw %v", got)
	}
	st := as.Stats(t)
	if st.AuthorizationCode != 3 || st.ClientOK < 3 || st.ClientBad != 0 {
		t.Fatalf("authorization server: %+v; want 3 codes exchanged by the configured client", st)
	}
	t.Logf("authorization server %+v; server calls %v; requests per replica %v", st, up.Calls(), served)

	checkNoSecrets(t, set, as, auditPath, alice, bob)
}

// waitListed waits until up_whoami is listed n times in a row (by the
// balancer, one replica after another).
func waitListed(t *testing.T, ctx context.Context, c *acctClient, n int) {
	t.Helper()
	start, inRow := time.Now(), 0
	for inRow < n {
		res, err := c.cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		found := false
		for _, tool := range res.Tools {
			found = found || tool.Name == "up_whoami"
		}
		if found {
			inRow++
			continue
		}
		inRow = 0
		if time.Since(start) > 60*time.Second {
			t.Fatal("up_whoami is not listed by every replica after 60 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("every replica lists up_whoami %s after alice connected", time.Since(start).Round(time.Millisecond))
}

// checkNoSecrets looks for every secret of the run in every replica's log,
// the audit file, /metrics (both listeners) and the status page and its
// JSON.
func checkNoSecrets(t *testing.T, set *replicaset.Set, as *oauthtest.AS, auditPath string, users ...*acctClient) {
	t.Helper()
	secrets := append(as.Secrets(t), acctClientSecret, acctAliceKey, acctBobKey)
	states := 0
	for _, u := range users {
		for _, v := range u.browser.Visited() {
			if pu, err := url.Parse(v); err == nil && pu.Path == "/oauth/callback" {
				if s := pu.Query().Get("state"); s != "" {
					secrets = append(secrets, s)
					states++
				}
			}
		}
	}
	if states < 3 || len(secrets) < 3+3+3*3 {
		t.Fatalf("only %d secrets (%d states) to look for", len(secrets), states)
	}
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	get := func(u string) string {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: HTTP %d %s", u, resp.StatusCode, b)
		}
		return string(b)
	}
	sources := map[string]string{}
	audit, err := os.ReadFile(auditPath)
	if err != nil || !bytes.Contains(audit, []byte("up_whoami")) {
		t.Fatalf("the audit file has no call of up_whoami: %v %.300s", err, audit)
	}
	sources["audit"] = string(audit)
	for i := range set.Len() {
		r := set.Replica(i)
		ops := strings.TrimSuffix(r.ReadyzURL(), "/readyz")
		sources[fmt.Sprintf("replica %d log", i)] = set.Logs(i)
		sources[fmt.Sprintf("replica %d /metrics", i)] = get("http://" + r.Addr() + "/metrics")
		sources[fmt.Sprintf("replica %d ops /metrics", i)] = get(ops + "/metrics")
		sources[fmt.Sprintf("replica %d status page", i)] = get("http://" + r.Addr() + "/")
		status := get("http://" + r.Addr() + "/api/status")
		if !strings.Contains(status, `"up"`) {
			t.Fatalf("replica %d's status names no server up: %.300s", i, status)
		}
		sources[fmt.Sprintf("replica %d /api/status", i)] = status
	}
	total := 0
	for name, text := range sources {
		total += len(text)
		for _, s := range secrets {
			for _, form := range []string{s, url.QueryEscape(s)} {
				if strings.Contains(text, form) {
					i := strings.Index(text, form)
					t.Errorf("%s holds a secret (%.12s…): …%s…", name, s, text[max(0, i-200):i])
				}
			}
		}
	}
	t.Logf("looked for %d secrets (%d states) in %d sources, %d bytes", len(secrets), states, len(sources), total)
}
