// Package oauthtest is test support for connected accounts (per-user
// OAuth to upstream MCP servers): a real authorization server — the npm
// package oauth2-mock-server 8.2.3, pinned in node/package-lock.json, run
// as a node process on a free loopback port by node/as.mjs — and a real
// protected MCP server: a go-sdk server behind go-sdk's
// auth.RequireBearerToken, checking each JWT against the authorization
// server's JWKS, serving its RFC 9728 metadata, and answering a whoami
// tool with the token's subject.
//
// oauth2-mock-server does the authorization-code grant with PKCE (S256,
// checked at the token endpoint) and ignores the RFC 8707 resource; as.mjs
// adds users (the login_hint a test's "browser" puts on the authorization
// URL becomes the token's sub), single-use codes and rotating refresh
// tokens, aud = the resource, a settable token lifetime, an optional
// client secret check and counters. It is test support, not product code.
package oauthtest

import (
	"bufio"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcp-mux/mcp-mux/internal/nodeclients"
)

//go:embed node/package.json node/package-lock.json node/as.mjs
var nodeFiles embed.FS

var (
	installOnce sync.Once
	installDir  string
	installErr  error
)

// install installs the pinned oauth2-mock-server once per process.
func install(t testing.TB) string {
	t.Helper()
	installOnce.Do(func() {
		sub, err := fs.Sub(nodeFiles, "node")
		if err != nil {
			installErr = err
			return
		}
		installDir, installErr = nodeclients.InstallFS("oauthtest", sub)
	})
	if installErr != nil {
		t.Fatalf("oauthtest: %v", installErr)
	}
	return installDir
}

// ASOptions configure an authorization server.
type ASOptions struct {
	// TokenTTL is the tokens' lifetime (default an hour).
	TokenTTL time.Duration
	// ClientID and ClientSecret, when set, are the only client the token
	// endpoint accepts.
	ClientID, ClientSecret string
}

// AS is a running authorization server.
type AS struct {
	// Issuer is its issuer URL (http://127.0.0.1:port, no trailing slash).
	Issuer string
	hc     *http.Client
}

// Stats are the authorization server's counters.
type Stats struct {
	Authorize         int            `json:"authorize"`          // authorization requests
	AuthorizationCode int            `json:"authorization_code"` // codes exchanged
	RefreshToken      int            `json:"refresh_token"`      // refreshes
	Refused           int            `json:"refused"`            // token requests answered invalid_grant by as.mjs
	RefusedReasons    map[string]int `json:"refused_reasons"`
	PKCES256          int            `json:"pkce_s256"` // authorization requests with an S256 challenge
	Resource          int            `json:"resource"`  // token requests naming a resource
	ClientOK          int            `json:"client_ok"`
	ClientBad         int            `json:"client_bad"`
}

// StartAS runs an authorization server until the test ends.
func StartAS(t testing.TB, o ASOptions) *AS {
	t.Helper()
	dir := install(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("oauthtest: node is required (CI installs it in .ci/run): %v", err)
	}
	ttl := o.TokenTTL
	if ttl <= 0 {
		ttl = time.Hour
	}
	cmd := exec.Command(node, filepath.Join(dir, "as.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("TOKEN_TTL=%d", int(ttl.Seconds())), "CLIENT_ID="+o.ClientID, "CLIENT_SECRET="+o.ClientSecret)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &lockedWriter{w: &stderr}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("oauthtest: starting the authorization server: %v", err)
	}
	exited := make(chan struct{})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(exited)
	}()
	hc := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		hc.CloseIdleConnections()
	})
	select {
	case issuer := <-lines:
		if !strings.HasPrefix(issuer, "http://127.0.0.1:") {
			t.Fatalf("oauthtest: the authorization server printed %q", issuer)
		}
		return &AS{Issuer: issuer, hc: hc}
	case <-exited:
		t.Fatalf("oauthtest: the authorization server exited: %s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("oauthtest: the authorization server did not start: %s", stderr.String())
	}
	return nil
}

// Stats returns the counters.
func (a *AS) Stats(t testing.TB) Stats {
	t.Helper()
	resp, err := a.hc.Get(a.Issuer + "/test/stats")
	if err != nil {
		t.Fatalf("oauthtest: stats: %v", err)
	}
	defer resp.Body.Close()
	var s Stats
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("oauthtest: stats: %v", err)
	}
	return s
}

// Secrets returns every code, PKCE verifier, access token and refresh
// token the authorization server issued or was sent so far.
func (a *AS) Secrets(t testing.TB) []string {
	t.Helper()
	resp, err := a.hc.Get(a.Issuer + "/test/secrets")
	if err != nil {
		t.Fatalf("oauthtest: secrets: %v", err)
	}
	defer resp.Body.Close()
	var s []string
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatalf("oauthtest: secrets: %v", err)
	}
	return s
}

// SetTokenTTL sets the lifetime of the tokens issued from now on.
func (a *AS) SetTokenTTL(t testing.TB, ttl time.Duration) {
	t.Helper()
	resp, err := a.hc.Post(fmt.Sprintf("%s/test/ttl?s=%d", a.Issuer, int(ttl.Seconds())), "text/plain", nil)
	if err != nil {
		t.Fatalf("oauthtest: ttl: %v", err)
	}
	resp.Body.Close()
}

// Browser is a user's browser: it opens an authorization URL signed in as
// User (the login_hint it adds) and follows the redirects back to the
// redirect URI. Visited records every URL it requested.
type Browser struct {
	User string
	hc   *http.Client

	mu      sync.Mutex
	visited []string
}

// NewBrowser returns user's browser; its connections close when the test
// ends.
func NewBrowser(t testing.TB, user string) *Browser {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	b := &Browser{User: user}
	b.hc = &http.Client{Transport: tr, Timeout: 30 * time.Second, CheckRedirect: func(r *http.Request, via []*http.Request) error {
		b.mu.Lock()
		b.visited = append(b.visited, r.URL.String())
		b.mu.Unlock()
		if len(via) > 5 {
			return errors.New("too many redirects")
		}
		return nil
	}}
	return b
}

// Open opens the authorization URL authURL and follows it to its end (the
// callback page): its status and body.
func (b *Browser) Open(ctx context.Context, authURL string) (int, string, error) {
	u, err := b.signIn(authURL)
	if err != nil {
		return 0, "", err
	}
	b.mu.Lock()
	b.visited = append(b.visited, u)
	b.mu.Unlock()
	return b.Get(ctx, u)
}

// Authorize opens authURL at the authorization server only and returns
// where it redirects (the callback URL with the code and state), without
// following it.
func (b *Browser) Authorize(ctx context.Context, authURL string) (string, error) {
	u, err := b.signIn(authURL)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	hc := *b.hc
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode/100 != 3 {
		return "", fmt.Errorf("the authorization server answered HTTP %d", resp.StatusCode)
	}
	return resp.Header.Get("Location"), nil
}

// Get requests u as the browser, following its redirects (at most 5, each
// recorded in Visited): the last status and body.
func (b *Browser) Get(ctx context.Context, u string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(body), err
}

// Visited returns the URLs the browser requested so far.
func (b *Browser) Visited() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.visited...)
}

// signIn adds the browser's user to an authorization URL.
func (b *Browser) signIn(authURL string) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("login_hint", b.User)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Resource is a running protected MCP server.
type Resource struct {
	as  *AS
	ts  *httptest.Server
	hc  *http.Client
	srv *mcp.Server

	mu           sync.Mutex
	jwks         *jose.JSONWebKeySet
	calls        map[string]int    // whoami calls by subject
	tokens       map[string]string // token jti → subject
	unauthorized int               // 401 answers to a request that carried a token
	missing      int               // 401 answers to a request without one
	// Seen holds every token string the server verified (for marker tests).
	seen []string
}

// Identity is what whoami answers.
type Identity struct {
	Sub string `json:"sub"`
	JTI string `json:"jti"`
	Exp int64  `json:"exp"`
}

// StartResource runs a protected MCP server whose tokens as issues, until
// the test ends. Its MCP endpoint is URL(); its resource metadata is at
// /.well-known/oauth-protected-resource/mcp.
func StartResource(t testing.TB, as *AS) *Resource {
	t.Helper()
	r := &Resource{as: as, hc: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second},
		calls: map[string]int{}, tokens: map[string]string{}}
	r.srv = mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(r.srv, &mcp.Tool{Name: "whoami", Description: "the subject of the caller's token"},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, Identity, error) {
			ti := req.Extra.TokenInfo
			if ti == nil {
				return nil, Identity{}, errors.New("no token")
			}
			id := Identity{Sub: ti.UserID, Exp: ti.Expiration.Unix()}
			id.JTI, _ = ti.Extra["jti"].(string)
			r.mu.Lock()
			r.calls[id.Sub]++
			r.mu.Unlock()
			b, _ := json.Marshal(id)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, id, nil
		})
	mux := http.NewServeMux()
	r.ts = httptest.NewUnstartedServer(mux)
	r.ts.Start()
	t.Cleanup(func() {
		r.ts.CloseClientConnections()
		r.ts.Close()
		r.hc.CloseIdleConnections()
	})
	metaURL := r.ts.URL + "/.well-known/oauth-protected-resource/mcp"
	mux.Handle("GET /.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: r.URL(), AuthorizationServers: []string{as.Issuer}, BearerMethodsSupported: []string{"header"}}))
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return r.srv }, nil)
	protected := auth.RequireBearerToken(r.verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: metaURL})(mcpHandler)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &statusWriter{ResponseWriter: w}
		protected.ServeHTTP(rec, req)
		if rec.status == http.StatusUnauthorized {
			r.mu.Lock()
			if req.Header.Get("Authorization") == "" {
				r.missing++
			} else {
				r.unauthorized++
			}
			r.mu.Unlock()
		}
	}))
	return r
}

// URL is the MCP endpoint (the RFC 8707 resource).
func (r *Resource) URL() string { return r.ts.URL + "/mcp" }

// Calls returns how many whoami calls each subject made.
func (r *Resource) Calls() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.calls {
		out[k] = v
	}
	return out
}

// Refused returns how many requests were answered 401: with a token the
// server refused (expired, bad signature…) and without one.
func (r *Resource) Refused() (withToken, without int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unauthorized, r.missing
}

// Tokens returns every distinct token the server accepted.
func (r *Resource) Tokens() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// verify checks a JWT: signed by the authorization server's key (RS256),
// its issuer, aud = this resource, not expired.
func (r *Resource) verify(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil || len(tok.Headers) != 1 {
		return nil, fmt.Errorf("%w: not a JWT", auth.ErrInvalidToken)
	}
	keys, err := r.keys(ctx)
	if err != nil {
		return nil, err
	}
	ks := keys.Key(tok.Headers[0].KeyID)
	if len(ks) == 0 {
		return nil, fmt.Errorf("%w: unknown key", auth.ErrInvalidToken)
	}
	var c jwt.Claims
	var extra struct {
		Scope string `json:"scope"`
	}
	if err := tok.Claims(ks[0].Key, &c, &extra); err != nil {
		return nil, fmt.Errorf("%w: bad signature", auth.ErrInvalidToken)
	}
	if err := c.ValidateWithLeeway(jwt.Expected{Issuer: r.as.Issuer, AnyAudience: jwt.Audience{r.URL()}, Time: time.Now()}, 0); err != nil {
		return nil, fmt.Errorf("%w: %v", auth.ErrInvalidToken, err)
	}
	if c.Subject == "" || c.Expiry == nil {
		return nil, fmt.Errorf("%w: no subject or expiry", auth.ErrInvalidToken)
	}
	r.mu.Lock()
	if _, ok := r.tokens[c.ID]; !ok {
		r.tokens[c.ID] = c.Subject
		r.seen = append(r.seen, token)
	}
	r.mu.Unlock()
	return &auth.TokenInfo{UserID: c.Subject, Expiration: c.Expiry.Time(), Scopes: strings.Fields(extra.Scope),
		Extra: map[string]any{"jti": c.ID}}, nil
}

// keys returns the authorization server's JWKS (fetched once).
func (r *Resource) keys(ctx context.Context) (*jose.JSONWebKeySet, error) {
	r.mu.Lock()
	k := r.jwks
	r.mu.Unlock()
	if k != nil {
		return k, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.as.Issuer+"/jwks", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the JWKS: %w", err)
	}
	defer resp.Body.Close()
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&set); err != nil {
		return nil, fmt.Errorf("the JWKS: %w", err)
	}
	r.mu.Lock()
	r.jwks = &set
	r.mu.Unlock()
	return &set, nil
}

// statusWriter records the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// lockedWriter serializes writes.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
