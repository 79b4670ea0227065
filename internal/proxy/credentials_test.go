package proxy_test

// End-to-end tests of the credentials feature (issue 4): per-call upstream
// headers (static < oauth < user_auth < headers_from_context), the secrets
// carrier, per-user isolation, illegal-value denial, OAuth refresh, the audit
// interceptor and stdio servers declaring per-caller blocks. Upstreams are
// real Streamable HTTP servers whose `headers` tool echoes the request
// headers they received.

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// startMuxEnv is startMux with $VAR expansion from env and Trace logging; it
// also returns the parsed config (for its warnings).
func startMuxEnv(t testing.TB, cfgJSON string, env map[string]string, opts proxy.Options) (*mux, *config.Config) {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgJSON), config.LoadOptions{Filename: "test.json", LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if len(cfg.Invalid) > 0 {
		t.Fatalf("invalid servers in test config: %+v", cfg.Invalid)
	}
	logs := &mcptest.LogBuffer{}
	opts.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace, JSONFormat: true})
	if opts.RetryMin == 0 {
		opts.RetryMin, opts.RetryMax = 20*time.Millisecond, 200*time.Millisecond
	}
	srv := proxy.New(opts)
	if err := srv.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Close(ctx)
		ts.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitDiscovery(ctx); err != nil {
		t.Fatalf("discovery: %v", err)
	}
	return &mux{srv: srv, ts: ts, logs: logs}, cfg
}

// --- client side ---------------------------------------------------------

type reqHeadersKey struct{}

// withHeaders makes the test client send these headers (name, value pairs)
// on the HTTP requests of calls made with the returned context.
func withHeaders(ctx context.Context, kv ...string) context.Context {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return context.WithValue(ctx, reqHeadersKey{}, h)
}

// clientRT adds fixed headers and per-request (context) headers to every
// request of a test client, and records every response body it reads.
type clientRT struct {
	base   http.RoundTripper
	static http.Header

	mu     sync.Mutex
	bodies []*mcptest.LogBuffer
}

func (c *clientRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range c.static {
		r.Header[k] = v
	}
	if h, ok := r.Context().Value(reqHeadersKey{}).(http.Header); ok {
		for k, v := range h {
			r.Header[k] = v
		}
	}
	base := c.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if resp != nil && resp.Body != nil {
		b := &mcptest.LogBuffer{}
		c.mu.Lock()
		c.bodies = append(c.bodies, b)
		c.mu.Unlock()
		resp.Body = teeBody{resp.Body, b}
	}
	return resp, err
}

// responses returns every response body read so far.
func (c *clientRT) responses() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, len(c.bodies))
	for i, b := range c.bodies {
		out[i] = b.String()
	}
	return out
}

type teeBody struct {
	io.ReadCloser
	w io.Writer
}

func (b teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		_, _ = b.w.Write(p[:n])
	}
	return n, err
}

// connectRT connects a go-sdk client whose requests go through rt.
func connectRT(t *testing.T, url string, rt *clientRT) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "cred-client", Version: "1"}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: rt}}
	cs, err := c.Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// connectAs connects with fixed headers (name, value pairs) on every request.
func connectAs(t *testing.T, url string, kv ...string) (*mcp.ClientSession, *clientRT) {
	t.Helper()
	rt := &clientRT{static: http.Header{}}
	for i := 0; i+1 < len(kv); i += 2 {
		rt.static.Set(kv[i], kv[i+1])
	}
	return connectRT(t, url, rt), rt
}

// call makes one tools/call and returns its text and isError; a protocol
// error is returned as err.
func call(ctx context.Context, cs *mcp.ClientSession, name string, args any) (string, bool, error) {
	if args == nil {
		args = map[string]any{}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", false, err
	}
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n"), res.IsError, nil
}

// mustCall is call that fails the test on a protocol error.
func mustCall(t *testing.T, ctx context.Context, cs *mcp.ClientSession, name string, args any) (string, bool) {
	t.Helper()
	text, isErr, err := call(ctx, cs, name, args)
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return text, isErr
}

// echoHeaders calls a server's headers tool and parses what the upstream
// received: lower-cased header name → values (one per line, i.e. per value
// the upstream saw).
func echoHeaders(t *testing.T, ctx context.Context, cs *mcp.ClientSession, tool string) map[string][]string {
	t.Helper()
	text, isErr := mustCall(t, ctx, cs, tool, nil)
	if isErr {
		t.Fatalf("%s failed: %s", tool, text)
	}
	return parseEcho(text)
}

func parseEcho(text string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		out[strings.ToLower(k)] = append(out[strings.ToLower(k)], v)
	}
	return out
}

// wantOne checks that the upstream saw header name exactly once, with want.
func wantOne(t *testing.T, h map[string][]string, name, want string) {
	t.Helper()
	got := h[strings.ToLower(name)]
	if len(got) != 1 || got[0] != want {
		t.Errorf("upstream saw %s = %q, want exactly [%q]", name, got, want)
	}
}

// noInternalHeaders checks that nothing of the inbound side reached the upstream.
func noInternalHeaders(t *testing.T, h map[string][]string) {
	t.Helper()
	for _, k := range []string{"x-mux-secrets", "mcp-mux-internal-user", "x-mux-user", "x-mux-thread-id"} {
		if v, ok := h[k]; ok {
			t.Errorf("upstream received inbound header %s: %q", k, v)
		}
	}
}

func secretsJSON(kv ...string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// mcpRequest builds an MCP POST (or other method) to url with the JSON and
// event-stream headers a client sends, plus hdr.
func mcpRequest(t *testing.T, ctx context.Context, method, url string, hdr map[string]string, body string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return req
}

// rawRequest sends one HTTP request to the mux and returns status, headers and body.
func rawRequest(t *testing.T, method, url string, hdr map[string]string, body string) (int, http.Header, string) {
	t.Helper()
	resp, err := testHTTP.Do(mcpRequest(t, context.Background(), method, url, hdr, body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

// --- upstream side -------------------------------------------------------

// echoUpstream is a real Streamable HTTP MCP server (mcptest.NewServer) that
// records the raw bytes of every connection (to check header spellings on the
// wire) and answers 401 to requests carrying a revoked Authorization value.
type echoUpstream struct {
	*httptest.Server
	revoked      sync.Map // Authorization value → true
	unauthorized atomic.Int32

	mu    sync.Mutex
	conns []*mcptest.LogBuffer
}

func startEchoUpstream(t *testing.T, name string) *echoUpstream {
	t.Helper()
	s := mcptest.NewServer(name)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u := &echoUpstream{}
	mux := http.NewServeMux()
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, v := range r.Header.Values("Authorization") {
			if _, bad := u.revoked.Load(v); bad {
				u.unauthorized.Add(1)
				w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
				http.Error(w, "token revoked", http.StatusUnauthorized)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	ts := httptest.NewUnstartedServer(mux)
	ts.Listener = &teeListener{Listener: ts.Listener, u: u}
	ts.Start()
	u.Server = ts
	t.Cleanup(func() {
		ts.Close()
		for ss := range s.Sessions() {
			_ = ss.Close()
		}
	})
	return u
}

func (u *echoUpstream) url() string { return u.URL + "/mcp" }

func (u *echoUpstream) revoke(authorization string) { u.revoked.Store(authorization, true) }

// headerSpellings returns every spelling of header name (any case) seen on
// the wire, with counts.
func (u *echoUpstream) headerSpellings(name string) map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := map[string]int{}
	for _, c := range u.conns {
		sc := bufio.NewScanner(strings.NewReader(c.String()))
		sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
		for sc.Scan() {
			k, _, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.EqualFold(k, name) {
				out[k]++
			}
		}
	}
	return out
}

type teeListener struct {
	net.Listener
	u *echoUpstream
}

func (l *teeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	b := &mcptest.LogBuffer{}
	l.u.mu.Lock()
	l.u.conns = append(l.u.conns, b)
	l.u.mu.Unlock()
	return teeConn{Conn: c, w: b}, nil
}

type teeConn struct {
	net.Conn
	w io.Writer
}

func (c teeConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		_, _ = c.w.Write(p[:n])
	}
	return n, err
}

// tokenServer is an OAuth token endpoint that counts its requests.
type tokenServer struct {
	*httptest.Server
	hits atomic.Int32
}

// startTokenServer answers the n-th request (from 1) with respond; nil
// respond issues "<prefix>-<n>" tokens valid for an hour.
func startTokenServer(t *testing.T, prefix string, respond func(n int, r *http.Request) (status int, contentType, body string)) *tokenServer {
	t.Helper()
	if respond == nil {
		respond = func(n int, _ *http.Request) (int, string, string) {
			return tokenJSON(fmt.Sprintf("%s-%d", prefix, n), 3600)
		}
	}
	ts := &tokenServer{}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(ts.hits.Add(1))
		_ = r.ParseForm()
		status, ct, body := respond(n, r)
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func tokenJSON(tok string, expiresIn int) (int, string, string) {
	b, _ := json.Marshal(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": expiresIn})
	return http.StatusOK, "application/json", string(b)
}

// --- 1. precedence and spelling -------------------------------------------

func TestCredentialPrecedenceAndSpelling(t *testing.T) {
	up := startEchoUpstream(t, "up")
	tok := startTokenServer(t, "oauth-prec", nil)
	cfg := fmt.Sprintf(`{
	  "inbound": {"auth": {"mode": "trusted_header"}},
	  "mcpServers": {"up": {"type": "http", "url": %q,
	    "headers": {"authorization": "$STATIC_AUTH", "X-Static-Only": "plain"},
	    "oauth": {"token_url": %q, "client_id": "mux", "client_secret": "$CLIENT_SECRET"},
	    "user_auth": {"header": "AUTHORIZATION", "users": {"alice": "$ALICE_CRED"}, "on_missing": "passthrough"},
	    "headers_from_context": {"headers": {"aUTHORIZATION": "token"}, "on_missing": "passthrough"}}}}`, up.url(), tok.URL)
	m, _ := startMuxEnv(t, cfg, map[string]string{
		"STATIC_AUTH": "Bearer static-cred", "CLIENT_SECRET": "client-secret", "ALICE_CRED": "Bearer alice-cred",
	}, proxy.Options{})
	alice, _ := connectAs(t, m.ts.URL, "X-Mux-User", "alice")
	bob, _ := connectAs(t, m.ts.URL, "X-Mux-User", "bob")
	bg := context.Background()
	ctxSecret := withHeaders(bg, "X-Mux-Secrets", secretsJSON("token", "Bearer ctx-cred"))

	for _, c := range []struct {
		name string
		cs   *mcp.ClientSession
		ctx  context.Context
		want string // "" = the OAuth token
	}{
		{"oauth over static (bob is not in user_auth)", bob, bg, ""},
		{"user_auth over oauth", alice, bg, "Bearer alice-cred"},
		{"headers_from_context over user_auth", alice, ctxSecret, "Bearer ctx-cred"},
		{"headers_from_context over oauth", bob, ctxSecret, "Bearer ctx-cred"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := echoHeaders(t, c.ctx, c.cs, "up_headers")
			got := h["authorization"]
			if len(got) != 1 {
				t.Fatalf("upstream saw Authorization %d times: %q", len(got), got)
			}
			if c.want == "" {
				if !strings.HasPrefix(got[0], "Bearer oauth-prec-") {
					t.Errorf("Authorization = %q, want the OAuth token", got[0])
				}
			} else if got[0] != c.want {
				t.Errorf("Authorization = %q, want %q", got[0], c.want)
			}
			wantOne(t, h, "X-Static-Only", "plain")
			noInternalHeaders(t, h)
		})
	}
	// On the wire every request spelled the header as the static config does.
	sp := up.headerSpellings("authorization")
	if len(sp) != 1 || sp["authorization"] == 0 {
		t.Errorf("Authorization spellings on the wire = %v, want only the static spelling \"authorization\"", sp)
	}
	if n := tok.hits.Load(); n != 1 {
		t.Errorf("token endpoint hit %d times, want 1 (the token is cached)", n)
	}
}

// --- 2. headers_from_context and the secrets carrier ------------------------

func TestSecretsCarrier(t *testing.T) {
	up := startEchoUpstream(t, "up")
	cfg := fmt.Sprintf(`{"mcpServers": {
	  "ctx": {"type": "http", "url": %[1]q, "headers": {"X-Api-Key": "static-key"},
	    "headers_from_context": {"headers": {"x-api-key": "api_key", "X-Tenant": "tenant"}}},
	  "pass": {"type": "http", "url": %[1]q, "headers": {"X-Api-Key": "static-key"},
	    "headers_from_context": {"headers": {"x-api-key": "api_key", "X-Tenant": "tenant"}, "on_missing": "passthrough"}}}}`, up.url())
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	cs, _ := connectAs(t, m.ts.URL)
	bg := context.Background()

	raw := secretsJSON("api_key", "k-json", "tenant", "t-json")
	h := echoHeaders(t, withHeaders(bg, "X-Mux-Secrets", raw), cs, "ctx_headers")
	wantOne(t, h, "X-Api-Key", "k-json")
	wantOne(t, h, "X-Tenant", "t-json")
	noInternalHeaders(t, h)

	for name, enc := range map[string]*base64.Encoding{"std": base64.StdEncoding, "raw url": base64.RawURLEncoding} {
		v := enc.EncodeToString([]byte(secretsJSON("api_key", "k-b64-"+name, "tenant", "t-b64")))
		h := echoHeaders(t, withHeaders(bg, "X-Mux-Secrets", v), cs, "ctx_headers")
		wantOne(t, h, "X-Api-Key", "k-b64-"+name)
		wantOne(t, h, "X-Tenant", "t-b64")
	}
	// Concurrent calls on one session, each with its own secrets, each see their own.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			key := fmt.Sprintf("k-conc-%d", i)
			ctx := withHeaders(bg, "X-Mux-Secrets", secretsJSON("api_key", key, "tenant", "t"))
			text, isErr, err := call(ctx, cs, "ctx_headers", nil)
			if got := parseEcho(text)["x-api-key"]; err != nil || isErr || len(got) != 1 || got[0] != key {
				t.Errorf("concurrent call %d: err=%v isError=%v X-Api-Key=%q", i, err, isErr, got)
			}
		})
	}
	wg.Wait()
	if sp := up.headerSpellings("x-api-key"); len(sp) != 1 || sp["X-Api-Key"] == 0 {
		t.Errorf("X-Api-Key spellings on the wire = %v, want only the static spelling", sp)
	}

	// Missing keys with on_missing deny: DeerFlow's message naming them, sorted.
	for _, c := range []struct {
		secrets string
		missing string
	}{
		{"", "api_key, tenant"},
		{secretsJSON("api_key", "k"), "tenant"},
		{secretsJSON("api_key", "k", "tenant", ""), "tenant"}, // empty counts as missing
	} {
		ctx := bg
		if c.secrets != "" {
			ctx = withHeaders(bg, "X-Mux-Secrets", c.secrets)
		}
		text, isErr := mustCall(t, ctx, cs, "ctx_headers", nil)
		want := "MCP server 'ctx' needs request-scoped credential(s) " + c.missing +
			". Send them in the X-Mux-Secrets request header (a JSON object of key → value), or set this server's headers_from_context.on_missing to 'passthrough'."
		if !isErr || text != want {
			t.Errorf("secrets %q: isError=%v text=%q, want %q", c.secrets, isErr, text, want)
		}
	}

	// passthrough: the static header stays; resolved ones are still injected.
	h = echoHeaders(t, bg, cs, "pass_headers")
	wantOne(t, h, "X-Api-Key", "static-key")
	if v, ok := h["x-tenant"]; ok {
		t.Errorf("X-Tenant sent without a secret: %q", v)
	}
	h = echoHeaders(t, withHeaders(bg, "X-Mux-Secrets", secretsJSON("tenant", "t-only")), cs, "pass_headers")
	wantOne(t, h, "X-Api-Key", "static-key")
	wantOne(t, h, "X-Tenant", "t-only")

	// A malformed carrier is refused with 400 naming the header, never its content.
	const marker = "sekrit-ctx-malformed-4e1f"
	for _, bad := range []string{
		`{"api_key": "` + marker + `"`,
		`{"api_key": 42, "x": "` + marker + `"}`,
		marker + "!!",
		base64.StdEncoding.EncodeToString([]byte(`["` + marker + `"]`)),
		`null`,
	} {
		status, _, body := rawRequest(t, http.MethodPost, m.ts.URL+"/mcp", map[string]string{"X-Mux-Secrets": bad}, initializeBody)
		if status != http.StatusBadRequest || !strings.Contains(body, "X-Mux-Secrets") || strings.Contains(body, marker) {
			t.Errorf("carrier %q: HTTP %d body %s", bad, status, body)
		}
	}
	// The same on an established session, through the SDK client.
	_, _, err := call(withHeaders(bg, "X-Mux-Secrets", `{"api_key": "`+marker+`"`), cs, "ctx_headers", nil)
	if err == nil || !strings.Contains(err.Error(), "X-Mux-Secrets") || strings.Contains(err.Error(), marker) {
		t.Errorf("malformed carrier on a session: err = %v", err)
	}
	if strings.Contains(m.logs.String(), marker) {
		t.Error("the malformed carrier's content was logged")
	}
}

// The OpenViking case: a static API key from the environment; an unset
// variable skips that server with a message naming header and variable.
func TestStaticAPIKeyFromEnvironment(t *testing.T) {
	up := startEchoUpstream(t, "up")
	cfg := fmt.Sprintf(`{"mcpServers": {
	  "viking": {"type": "http", "url": %[1]q, "headers": {"X-API-Key": "$OPENVIKING_API_KEY"}},
	  "other": {"type": "http", "url": %[1]q}}}`, up.url())
	m, _ := startMuxEnv(t, cfg, map[string]string{"OPENVIKING_API_KEY": "ov-key-123"}, proxy.Options{})
	cs, _ := connectAs(t, m.ts.URL)
	wantOne(t, echoHeaders(t, context.Background(), cs, "viking_headers"), "X-API-Key", "ov-key-123")
	if sp := up.headerSpellings("x-api-key"); len(sp) != 1 || sp["X-API-Key"] == 0 {
		t.Errorf("X-API-Key spellings on the wire = %v", sp)
	}

	parsed, err := config.Parse([]byte(cfg), config.LoadOptions{Filename: "t.json", LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if len(parsed.Invalid) != 1 || parsed.Invalid[0].Name != "viking" || len(parsed.Servers) != 1 ||
		!strings.Contains(fmt.Sprint(parsed.Invalid[0].Problems), "header 'X-API-Key' comes from $OPENVIKING_API_KEY, which is not set") {
		t.Errorf("unset variable: invalid = %+v, servers = %d", parsed.Invalid, len(parsed.Servers))
	}
}

// --- 3. user_auth isolation ------------------------------------------------

const (
	aliceKey = "sekrit-apikey-alice-0a1b"
	bobKey   = "sekrit-apikey-bob-2c3d"
	carolKey = "sekrit-apikey-carol-4e5f"
)

func TestUserAuthIsolation(t *testing.T) {
	up := startEchoUpstream(t, "up")
	cfg := fmt.Sprintf(`{
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY", "carol": "$CAROL_KEY"}}},
	  "mcpServers": {"up": {"type": "http", "url": %q, "session_scope": "shared",
	    "user_auth": {"users": {"alice": "$ALICE_CRED", "bob": "$BOB_CRED"}}}}}`, up.url())
	m, _ := startMuxEnv(t, cfg, map[string]string{
		"ALICE_KEY": aliceKey, "BOB_KEY": bobKey, "CAROL_KEY": carolKey,
		"ALICE_CRED": "Bearer sekrit-user-alice", "BOB_CRED": "Bearer sekrit-user-bob",
	}, proxy.Options{})
	// A client cannot claim another identity through the internal header.
	alice, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+aliceKey)
	bob, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+bobKey, "Mcp-Mux-Internal-User", "alice")
	carol, _ := connectAs(t, m.ts.URL, "Authorization", "Bearer "+carolKey)

	type result struct {
		user, auth, session string
		err                 error
	}
	results := make(chan result, 40)
	var wg sync.WaitGroup
	for range 20 {
		for user, cs := range map[string]*mcp.ClientSession{"alice": alice, "bob": bob} {
			wg.Go(func() {
				text, isErr, err := call(context.Background(), cs, "up_headers", nil)
				if err == nil && isErr {
					err = fmt.Errorf("tool error: %s", text)
				}
				h := parseEcho(text)
				r := result{user: user, err: err, session: strings.Join(h["mcp-session-id"], ",")}
				r.auth = strings.Join(h["authorization"], " | ")
				results <- r
			})
		}
	}
	wg.Wait()
	close(results)
	sessions := map[string]map[string]bool{"alice": {}, "bob": {}}
	for r := range results {
		if r.err != nil {
			t.Errorf("%s: %v", r.user, r.err)
			continue
		}
		if want := "Bearer sekrit-user-" + r.user; r.auth != want {
			t.Errorf("a call by %s reached the upstream with Authorization %q, want %q", r.user, r.auth, want)
		}
		sessions[r.user][r.session] = true
	}
	for s := range sessions["alice"] {
		if sessions["bob"][s] {
			t.Errorf("alice and bob shared upstream session %s (session_scope shared must still separate credentials)", s)
		}
	}
	if len(sessions["alice"]) == 0 || len(sessions["bob"]) == 0 {
		t.Errorf("upstream sessions seen: %v", sessions)
	}

	// An unmapped user is denied with DeerFlow's message naming the id.
	text, isErr := mustCall(t, context.Background(), carol, "up_headers", nil)
	want := "No credential is configured for your account (user id 'carol') on MCP server 'up'. " +
		"Ask the operator to add this exact id to that server's user_auth.users map (or set its environment variable)."
	if !isErr || text != want {
		t.Errorf("carol: isError=%v text=%q", isErr, text)
	}

	// bob's key on alice's session: 403, for calls and for DELETE.
	callBody := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"up_headers","arguments":{}}}`
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		body := ""
		if method == http.MethodPost {
			body = callBody
		}
		status, _, resp := rawRequest(t, method, m.ts.URL+"/mcp", map[string]string{
			"Authorization": "Bearer " + bobKey, "Mcp-Session-Id": alice.ID(), "Mcp-Protocol-Version": "2025-11-25",
		}, body)
		if status != http.StatusForbidden || strings.Contains(resp, "sekrit-user-alice") {
			t.Errorf("%s with bob's key on alice's session: HTTP %d %s", method, status, resp)
		}
	}
	// alice's session survived.
	h := echoHeaders(t, context.Background(), alice, "up_headers")
	wantOne(t, h, "Authorization", "Bearer sekrit-user-alice")
}

// --- 4. illegal values -----------------------------------------------------

func TestIllegalHeaderValuesDenied(t *testing.T) {
	up := startEchoUpstream(t, "up")
	tok := startTokenServer(t, "", func(int, *http.Request) (int, string, string) {
		return tokenJSON("sekrit-oauth-nl-71c2\nX-Injected: 1", 3600)
	})
	cfg := fmt.Sprintf(`{
	  "inbound": {"auth": {"mode": "trusted_header"}},
	  "mcpServers": {
	    "ua": {"type": "http", "url": %[1]q, "user_auth": {"users": {"alice": "$ALICE_CRED"}, "on_missing": "passthrough"}},
	    "cx": {"type": "http", "url": %[1]q, "headers_from_context": {"headers": {"X-Token": "tok", "X-Other": "other"}, "on_missing": "passthrough"}},
	    "oa": {"type": "http", "url": %[1]q, "oauth": {"token_url": %[2]q, "client_id": "mux", "client_secret": "cs"}}}}`, up.url(), tok.URL)
	m, _ := startMuxEnv(t, cfg, map[string]string{"ALICE_CRED": "Bearer sekrit-user-nl-9a0b\n"}, proxy.Options{})
	alice, rt := connectAs(t, m.ts.URL, "X-Mux-User", "alice")
	bg := context.Background()

	text, isErr := mustCall(t, bg, alice, "ua_headers", nil)
	want := "The credential configured for your account (user id 'alice') on MCP server 'ua' contains a line break or another forbidden control character, " +
		"so it cannot be sent as an HTTP header. Ask the operator to fix that server's user_auth.users entry; a stray newline in the value or its environment variable is the usual cause."
	if !isErr || text != want {
		t.Errorf("user_auth with a newline (denied despite passthrough): isError=%v text=%q", isErr, text)
	}

	for _, c := range []struct{ value, reason string }{
		{"sekrit-ctx-crlf-3d4e\r\n", "contains a line break or another forbidden control character"},
		{" sekrit-ctx-lead-5f6a", "has leading or trailing whitespace"},
		{"sekrit-ctx-\u00e9-7b8c", "contains characters outside ASCII"},
		{"sekrit-ctx-nul-\x00", "contains a line break or another forbidden control character"},
	} {
		ctx := withHeaders(bg, "X-Mux-Secrets", secretsJSON("tok", c.value, "other", "fine"))
		text, isErr := mustCall(t, ctx, alice, "cx_headers", nil)
		want := "MCP server 'cx' cannot send request-scoped credential(s) as HTTP header values: 'tok' " + c.reason +
			". Fix the value passed in the X-Mux-Secrets request header; a stray newline picked up when reading a token from a file is the usual cause."
		if !isErr || text != want {
			t.Errorf("secret %q: isError=%v text=%q, want %q", c.value, isErr, text, want)
		}
	}

	text, isErr = mustCall(t, bg, alice, "oa_headers", nil)
	want = "OAuth token for MCP server 'oa' cannot be sent as an HTTP header value: the Authorization value contains a line break or another forbidden control character. " +
		"Check what the token endpoint returned for this server."
	if !isErr || text != want {
		t.Errorf("OAuth token with a newline: isError=%v text=%q", isErr, text)
	}

	// Static headers: the server is skipped at load with the header named.
	bad, err := config.Parse([]byte(fmt.Sprintf(`{"mcpServers": {"st": {"type": "http", "url": %q, "headers": {"X-Key": "$BAD"}}}}`, up.url())),
		config.LoadOptions{Filename: "t.json", LookupEnv: func(string) (string, bool) { return "sekrit-static-nl-1c2d\r\n", true }})
	if err != nil {
		t.Fatal(err)
	}
	if len(bad.Invalid) != 1 || !strings.Contains(fmt.Sprint(bad.Invalid[0].Problems), "X-Key") ||
		!strings.Contains(fmt.Sprint(bad.Invalid[0].Problems), "line break") || strings.Contains(fmt.Sprint(bad.Invalid[0].Problems), "sekrit") {
		t.Errorf("illegal static header: invalid = %+v", bad.Invalid)
	}

	// No value is echoed anywhere.
	for _, s := range append(rt.responses(), m.logs.String()) {
		if strings.Contains(s, "sekrit") {
			t.Errorf("a rejected value leaked: %s", s)
		}
	}
	if up.headerSpellings("X-Injected")["X-Injected"] != 0 {
		t.Error("the injected header reached the upstream")
	}
}

// --- 5. OAuth ---------------------------------------------------------------

func TestOAuthRefreshBeforeExpiry(t *testing.T) {
	up := startEchoUpstream(t, "up")
	tok := startTokenServer(t, "", func(n int, _ *http.Request) (int, string, string) {
		return tokenJSON(fmt.Sprintf("short-%d", n), 3)
	})
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q,
	  "oauth": {"token_url": %q, "client_id": "mux", "client_secret": "cs", "refresh_skew_seconds": 1}}}}`, up.url(), tok.URL)
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	cs, _ := connectAs(t, m.ts.URL)
	bg := context.Background()

	first := echoHeaders(t, bg, cs, "up_headers")["authorization"]
	second := echoHeaders(t, bg, cs, "up_headers")["authorization"]
	if len(first) != 1 || !slices.Equal(first, second) {
		t.Fatalf("consecutive calls within the token's life used %q then %q", first, second)
	}
	hitsBefore := tok.hits.Load()
	deadline := time.Now().Add(15 * time.Second)
	var got []string
	for time.Now().Before(deadline) {
		got = echoHeaders(t, bg, cs, "up_headers")["authorization"]
		if !slices.Equal(got, first) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(got) != 1 || slices.Equal(got, first) || !strings.HasPrefix(got[0], "Bearer short-") {
		t.Fatalf("token never refreshed: still %q", got)
	}
	if n := tok.hits.Load() - hitsBefore; n != 1 {
		t.Errorf("%d token requests for one expiry, want 1", n)
	}
}

func TestOAuthRefreshAfter401(t *testing.T) {
	up := startEchoUpstream(t, "up")
	tok := startTokenServer(t, "tok", nil)
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q,
	  "oauth": {"token_url": %q, "client_id": "mux", "client_secret": "cs"}}}}`, up.url(), tok.URL)
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	cs, _ := connectAs(t, m.ts.URL)
	bg := context.Background()

	cur := echoHeaders(t, bg, cs, "up_headers")["authorization"]
	if len(cur) != 1 {
		t.Fatalf("Authorization = %q", cur)
	}

	// The token is revoked while the upstream session is open: the call's
	// 401 triggers one refresh and one retry, and it succeeds.
	t.Run("open session", func(t *testing.T) {
		hits, unauth := tok.hits.Load(), up.unauthorized.Load()
		up.revoke(cur[0])
		got := echoHeaders(t, bg, cs, "up_headers")["authorization"]
		if len(got) != 1 || got[0] == cur[0] {
			t.Fatalf("after revocation Authorization = %q", got)
		}
		if n := tok.hits.Load() - hits; n != 1 {
			t.Errorf("%d token requests after one 401, want 1", n)
		}
		if n := up.unauthorized.Load() - unauth; n != 1 {
			t.Errorf("upstream answered 401 %d times, want 1 (one retry)", n)
		}
		cur = got
	})

	// Concurrent calls refused with the same token cause one refresh.
	t.Run("concurrent", func(t *testing.T) {
		hits := tok.hits.Load()
		up.revoke(cur[0])
		var wg sync.WaitGroup
		var failures atomic.Int32
		for range 10 {
			wg.Go(func() {
				text, isErr, err := call(bg, cs, "up_headers", nil)
				if err != nil || isErr || slices.Contains(parseEcho(text)["authorization"], cur[0]) {
					failures.Add(1)
					t.Logf("call: err=%v isError=%v text=%q", err, isErr, text)
				}
			})
		}
		wg.Wait()
		if failures.Load() > 0 {
			t.Errorf("%d of 10 concurrent calls failed after a revocation", failures.Load())
		}
		if n := tok.hits.Load() - hits; n != 1 {
			t.Errorf("%d token requests for one revoked token, want 1", n)
		}
		cur = echoHeaders(t, bg, cs, "up_headers")["authorization"]
	})

	// The token is revoked before a new upstream session is opened (a new
	// downstream session): the 401 comes from initialize.
	t.Run("new session", func(t *testing.T) {
		hits := tok.hits.Load()
		up.revoke(cur[0])
		cs2, _ := connectAs(t, m.ts.URL)
		text, isErr := mustCall(t, bg, cs2, "up_headers", nil)
		got := parseEcho(text)["authorization"]
		if isErr || len(got) != 1 || got[0] == cur[0] {
			t.Fatalf("call on a new session after revocation: isError=%v text=%q", isErr, text)
		}
		if n := tok.hits.Load() - hits; n != 1 {
			t.Errorf("%d token requests after one 401, want 1", n)
		}
	})
}

// A token the upstream refuses at discovery is refreshed before the next
// discovery attempt (initialize's 401 reaches OnUnauthorized).
func TestOAuthDiscoveryRefreshAfter401(t *testing.T) {
	up := startEchoUpstream(t, "up")
	up.revoke("Bearer disc-1")
	tok := startTokenServer(t, "disc", nil)
	cfg := fmt.Sprintf(`{"mcpServers": {"up": {"type": "http", "url": %q,
	  "oauth": {"token_url": %q, "client_id": "mux", "client_secret": "cs"}}}}`, up.url(), tok.URL)
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	cs, _ := connectAs(t, m.ts.URL)
	deadline := time.Now().Add(10 * time.Second)
	for !contains(toolNames(t, cs), "up_headers") {
		if time.Now().After(deadline) {
			t.Fatalf("tools never discovered after the first token was refused; token requests: %d", tok.hits.Load())
		}
		time.Sleep(50 * time.Millisecond)
	}
	wantOne(t, echoHeaders(t, context.Background(), cs, "up_headers"), "Authorization", "Bearer disc-2")
	if n := tok.hits.Load(); n != 2 {
		t.Errorf("%d token requests, want 2", n)
	}
}

func TestOAuthTokenEndpointFailures(t *testing.T) {
	up := startEchoUpstream(t, "up")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/token"
	ln.Close()
	garbage := startTokenServer(t, "", func(int, *http.Request) (int, string, string) {
		return http.StatusOK, "text/html", "<html>sekrit-oauth-garbage-2b3c</html>"
	})
	refused := startTokenServer(t, "", func(int, *http.Request) (int, string, string) {
		return http.StatusBadRequest, "application/json", `{"error":"invalid_client","error_description":"sekrit-oauth-desc-4d5e"}`
	})
	missing := startTokenServer(t, "", func(int, *http.Request) (int, string, string) {
		return http.StatusOK, "application/json", `{"token_type":"Bearer","refresh_token":"sekrit-oauth-rt-6f7a"}`
	})
	cfg := fmt.Sprintf(`{"mcpServers": {
	  "down": {"type": "http", "url": %[1]q, "oauth": {"token_url": %[2]q, "client_id": "mux", "client_secret": "cs"}},
	  "garbage": {"type": "http", "url": %[1]q, "oauth": {"token_url": %[3]q, "client_id": "mux", "client_secret": "cs"}},
	  "refused": {"type": "http", "url": %[1]q, "oauth": {"token_url": %[4]q, "client_id": "mux", "client_secret": "cs"}},
	  "missing": {"type": "http", "url": %[1]q, "oauth": {"token_url": %[5]q, "client_id": "mux", "client_secret": "cs"}},
	  "ok": {"type": "http", "url": %[1]q, "headers": {"X-Key": "fine"}}}}`, up.url(), downURL, garbage.URL, refused.URL, missing.URL)
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{})
	cs, rt := connectAs(t, m.ts.URL)
	bg := context.Background()
	for server, want := range map[string]string{
		"down":    "OAuth token request to " + downURL + " failed",
		"garbage": "OAuth token endpoint " + garbage.URL + " returned a response that is neither a JSON object nor form-encoded",
		"refused": "OAuth token endpoint " + refused.URL + " refused the request (HTTP 400): invalid_client",
		"missing": "OAuth token response missing 'access_token'",
	} {
		text, isErr := mustCall(t, bg, cs, server+"_headers", nil)
		if !isErr || !strings.Contains(text, "MCP server '"+server+"'") || !strings.Contains(text, want) {
			t.Errorf("%s: isError=%v text=%q, want it to name the server and contain %q", server, isErr, text, want)
		}
		// The other server is unaffected.
		wantOne(t, echoHeaders(t, bg, cs, "ok_headers"), "X-Key", "fine")
	}
	for _, s := range append(rt.responses(), m.logs.String()) {
		if strings.Contains(s, "sekrit") {
			t.Errorf("token endpoint output leaked: %s", s)
		}
	}
}

// --- 8. audit interceptor ----------------------------------------------------

func TestAuditInterceptor(t *testing.T) {
	up := startEchoUpstream(t, "up")
	cfg := fmt.Sprintf(`{
	  "inbound": {"auth": {"mode": "trusted_header"}},
	  "mcpInterceptors": ["audit", "my_package.mcp.auth:build_auth_interceptor"],
	  "mcpServers": {"up": {"type": "http", "url": %q, "headers": {"X-Key": "sekrit-static-audit-8e9f"},
	    "user_auth": {"users": {"alice": "Bearer sekrit-user-audit-0a1b"}}}}}`, up.url())
	// Records off; the line shows callers as records would: hashed (issue 39).
	ids := secret.NewIDHash("audit-interceptor-key")
	a, err := audit.New(audit.Options{IDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := startMuxEnv(t, cfg, nil, proxy.Options{Audit: a})
	alice, _ := connectAs(t, m.ts.URL, "X-Mux-User", "alice")
	bob, _ := connectAs(t, m.ts.URL, "X-Mux-User", "bob")
	ctx := withHeaders(context.Background(), "X-Mux-Thread-Id", "thread-42")

	if text, isErr := mustCall(t, ctx, alice, "up_echo", map[string]any{"text": "sekrit-arg-audit-2c3d"}); isErr || text != "sekrit-arg-audit-2c3d" {
		t.Fatalf("echo: %v %q", isErr, text)
	}
	if _, isErr := mustCall(t, ctx, alice, "up_fail", nil); !isErr {
		t.Fatal("fail did not fail")
	}
	if _, isErr := mustCall(t, context.Background(), bob, "up_headers", nil); !isErr {
		t.Fatal("bob was not denied")
	}

	type line struct {
		Message, Module, User, Thread, Server, Tool, Outcome string
		Duration                                             *float64
	}
	var audits []line
	var warned bool
	for _, l := range strings.Split(m.logs.String(), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(l), &e) != nil {
			continue
		}
		str := func(k string) string { s, _ := e[k].(string); return s }
		if str("@message") == "skipping interceptor" && strings.Contains(str("reason"), "my_package.mcp.auth:build_auth_interceptor") {
			warned = true
		}
		if str("@message") != "tool call" || !strings.HasSuffix(str("@module"), "audit") {
			continue
		}
		a := line{Message: str("@message"), Module: str("@module"), User: str("user"), Thread: str("thread"), Server: str("server"), Tool: str("tool"), Outcome: str("outcome")}
		if d, ok := e["duration_ms"].(float64); ok {
			a.Duration = &d
		}
		audits = append(audits, a)
		for _, forbidden := range []string{"sekrit", "arguments", "headers\":", "Authorization"} {
			if strings.Contains(l, forbidden) {
				t.Errorf("audit line contains %q: %s", forbidden, l)
			}
		}
	}
	if !warned {
		t.Error("no warning naming the unknown interceptor")
	}
	if len(audits) != 3 {
		t.Fatalf("%d audit lines for 3 calls: %+v", len(audits), audits)
	}
	want := []line{
		{User: ids.Of("alice"), Thread: "thread-42", Server: "up", Tool: "up_echo", Outcome: "ok"},
		{User: ids.Of("alice"), Thread: "thread-42", Server: "up", Tool: "up_fail", Outcome: "tool_error"},
		{User: ids.Of("bob"), Thread: bob.ID(), Server: "up", Tool: "up_headers"},
	}
	for i, w := range want {
		a := audits[i]
		if a.User != w.User || a.Thread != w.Thread || a.Server != w.Server || a.Tool != w.Tool || a.Duration == nil ||
			(w.Outcome != "" && a.Outcome != w.Outcome) || a.Outcome == "" {
			t.Errorf("audit line %d = %+v, want %+v", i, a, w)
		}
	}
	if strings.Contains(m.logs.String(), "sekrit") {
		t.Error("a secret or an argument reached the logs")
	}
}

// --- 9. stdio servers declaring per-caller blocks ----------------------------

func TestStdioUserAuthIgnoredWithWarning(t *testing.T) {
	cfg := fmt.Sprintf(`{"inbound": {"auth": {"mode": "trusted_header"}}, "mcpServers": {%s}}`,
		stdioServerJSON(t, "local", mcptest.StdioOptions{}, `, "user_auth": {"users": {"alice": "Bearer x"}}, "headers_from_context": {"headers": {"X-A": "a"}}`))
	m, parsed := startMuxEnv(t, cfg, nil, proxy.Options{})
	var warnings []string
	for _, w := range parsed.Warnings {
		warnings = append(warnings, w.Error())
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{"user_auth is ignored for this stdio server", "headers_from_context is ignored for this stdio server"} {
		if !strings.Contains(all, want) {
			t.Errorf("config warnings lack %q:\n%s", want, all)
		}
	}
	// bob is not mapped and no secrets are sent: calls work all the same.
	bob, _ := connectAs(t, m.ts.URL, "X-Mux-User", "bob")
	if text, isErr := mustCall(t, context.Background(), bob, "local_echo", map[string]any{"text": "hi"}); isErr || text != "hi" {
		t.Errorf("stdio call: isError=%v text=%q", isErr, text)
	}
}
