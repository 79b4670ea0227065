package headers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// tokenRequest is what a test token endpoint received.
type tokenRequest struct {
	form       url.Values
	basicUser  string
	basicPass  string
	basic      bool
	authHeader string
}

// tokenServer is a real token endpoint whose answers the test scripts.
type tokenServer struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []tokenRequest
	respond func(n int, req tokenRequest) (status int, contentType, body string)
}

func newTokenServer(t *testing.T, respond func(n int, req tokenRequest) (int, string, string)) *tokenServer {
	t.Helper()
	ts := &tokenServer{respond: respond}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "token endpoint wants POST", http.StatusMethodNotAllowed)
			return
		}
		_ = r.ParseForm()
		req := tokenRequest{form: r.PostForm, authHeader: r.Header.Get("Authorization")}
		if u, p, ok := r.BasicAuth(); ok {
			req.basicUser, _ = url.QueryUnescape(u)
			req.basicPass, _ = url.QueryUnescape(p)
			req.basic = true
		}
		ts.mu.Lock()
		ts.reqs = append(ts.reqs, req)
		n := len(ts.reqs)
		ts.mu.Unlock()
		status, ct, body := ts.respond(n, req)
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func (ts *tokenServer) hits() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return len(ts.reqs)
}

func (ts *tokenServer) request(i int) tokenRequest {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.reqs[i]
}

func jsonToken(tok string, expiresIn int) (int, string, string) {
	return http.StatusOK, "application/json", fmt.Sprintf(`{"access_token":%q,"token_type":"Bearer","expires_in":%d}`, tok, expiresIn)
}

func numberedTokens(n int, _ tokenRequest) (int, string, string) {
	return jsonToken(fmt.Sprintf("tok-%d", n), 3600)
}

func authz(t *testing.T, r *Resolver) string {
	t.Helper()
	h, err := r.ForCall(context.Background(), "u", nil)
	if err != nil {
		t.Fatalf("ForCall: %v", err)
	}
	return h.Get("Authorization")
}

func TestOAuthClientCredentialsAuthStyles(t *testing.T) {
	tests := []struct {
		style     string
		wantBasic bool
	}{
		{AuthStyleBasic, true},
		{AuthStylePost, false},
		{AuthStyleAuto, true}, // x/oauth2 AutoDetect tries the header first
		{"", true},
	}
	for _, tt := range tests {
		t.Run("style="+tt.style, func(t *testing.T) {
			ts := newTokenServer(t, numberedTokens)
			r := mustNew(t, Options{OAuth: &OAuthOptions{
				TokenURL: ts.URL, ClientID: "my-client", ClientSecret: "my-secret",
				Scope: "read write", Audience: "https://api.example", AuthStyle: tt.style,
				ExtraParams: map[string]string{"tenant": "acme"},
			}})
			if got := authz(t, r); got != "Bearer tok-1" {
				t.Fatalf("Authorization = %q", got)
			}
			req := ts.request(0)
			f := req.form
			if f.Get("grant_type") != "client_credentials" || f.Get("scope") != "read write" ||
				f.Get("audience") != "https://api.example" || f.Get("tenant") != "acme" {
				t.Errorf("form = %v", f)
			}
			if f.Has("resource") {
				t.Errorf("a configured token_url sends no resource: %v", f)
			}
			if tt.wantBasic {
				if !req.basic || req.basicUser != "my-client" || req.basicPass != "my-secret" {
					t.Errorf("want client_secret_basic, got header %q", req.authHeader)
				}
				if f.Has("client_secret") || f.Has("client_id") {
					t.Errorf("basic style also sent credentials in the body: %v", f)
				}
			} else {
				if req.authHeader != "" {
					t.Errorf("post style sent Authorization %q", req.authHeader)
				}
				if f.Get("client_id") != "my-client" || f.Get("client_secret") != "my-secret" {
					t.Errorf("want client_secret_post, form = %v", f)
				}
			}
			if ts.hits() != 1 {
				t.Errorf("hits = %d", ts.hits())
			}
		})
	}
}

func TestOAuthRefreshTokenRotation(t *testing.T) {
	ts := newTokenServer(t, func(n int, req tokenRequest) (int, string, string) {
		return http.StatusOK, "application/json",
			fmt.Sprintf(`{"access_token":"tok-%d","refresh_token":"rt-%d","expires_in":3600}`, n, n+1)
	})
	r := mustNew(t, Options{OAuth: &OAuthOptions{
		TokenURL: ts.URL, GrantType: GrantRefreshToken, RefreshToken: "rt-1", Scope: "s",
	}})
	for i := 1; i <= 3; i++ {
		if got, want := authz(t, r), fmt.Sprintf("Bearer tok-%d", i); got != want {
			t.Fatalf("round %d: Authorization = %q, want %q", i, got, want)
		}
		req := ts.request(i - 1)
		if req.form.Get("grant_type") != "refresh_token" || req.form.Get("refresh_token") != fmt.Sprintf("rt-%d", i) ||
			req.form.Get("scope") != "s" {
			t.Fatalf("round %d: form = %v", i, req.form)
		}
		if req.authHeader != "" || req.form.Has("client_id") {
			t.Fatalf("round %d: no client id configured, yet sent %q / %v", i, req.authHeader, req.form)
		}
		r.Unauthorized(fmt.Sprintf("Bearer tok-%d", i))
	}
	if ts.hits() != 3 {
		t.Fatalf("hits = %d, want 3", ts.hits())
	}
}

func TestOAuthRefreshTokenWithClient(t *testing.T) {
	ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) {
		return http.StatusOK, "application/json", `{"access_token":"a"}` // no rotation: keep rt-1
	})
	r := mustNew(t, Options{OAuth: &OAuthOptions{
		TokenURL: ts.URL, GrantType: GrantRefreshToken, RefreshToken: "rt-1",
		ClientID: "cid", ClientSecret: "csec", AuthStyle: AuthStylePost,
	}})
	authz(t, r)
	r.Unauthorized("a")
	authz(t, r)
	for i := 0; i < 2; i++ {
		f := ts.request(i).form
		if f.Get("refresh_token") != "rt-1" || f.Get("client_id") != "cid" || f.Get("client_secret") != "csec" {
			t.Fatalf("request %d form = %v", i, f)
		}
	}
}

// TestOAuthRefreshBeforeExpiry: expires_in 2 s with a 1 s skew is refreshed
// after about a second, and not before.
func TestOAuthRefreshBeforeExpiry(t *testing.T) {
	ts := newTokenServer(t, func(n int, _ tokenRequest) (int, string, string) {
		return jsonToken(fmt.Sprintf("tok-%d", n), 2)
	})
	r := mustNew(t, Options{OAuth: &OAuthOptions{
		TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec", RefreshSkew: time.Second,
	}})
	start := time.Now()
	if got := authz(t, r); got != "Bearer tok-1" {
		t.Fatalf("first token %q", got)
	}
	if got := authz(t, r); got != "Bearer tok-1" || ts.hits() != 1 {
		t.Fatalf("a fresh token was refetched: %q, hits %d", got, ts.hits())
	}
	deadline := time.Now().Add(5 * time.Second)
	for authz(t, r) == "Bearer tok-1" {
		if time.Now().After(deadline) {
			t.Fatal("token not refreshed within 5s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if el := time.Since(start); el < 900*time.Millisecond {
		t.Fatalf("refreshed after %v, before the skew window", el)
	}
	if ts.hits() != 2 {
		t.Fatalf("hits = %d, want 2", ts.hits())
	}
}

// TestOAuthUnauthorizedOnce: many callers report the same stale token; one
// refresh happens and all of them get the new token.
func TestOAuthUnauthorizedOnce(t *testing.T) {
	ts := newTokenServer(t, numberedTokens)
	r := mustNew(t, Options{OAuth: &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec"}})
	h, err := r.Base(context.Background())
	if err != nil || h.Get("Authorization") != "Bearer tok-1" {
		t.Fatalf("Base = %v, %v", h, err)
	}
	r.Unauthorized("Bearer some-other-token") // not ours: ignored
	r.Unauthorized("")
	if authz(t, r); ts.hits() != 1 {
		t.Fatalf("an unrelated token caused a refresh")
	}

	var wg sync.WaitGroup
	got := make([]string, 16)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				r.Unauthorized("Bearer tok-1")
			} else {
				r.Unauthorized("tok-1") // the bare access token works too
			}
			h, err := r.ForCall(context.Background(), "u", nil)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = h.Get("Authorization")
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != "Bearer tok-2" {
			t.Errorf("caller %d got %q", i, g)
		}
	}
	if ts.hits() != 2 {
		t.Fatalf("hits = %d, want 2", ts.hits())
	}

	r.UnauthorizedHeader(http.Header{"authorization": {"Bearer tok-2"}})
	if got := authz(t, r); got != "Bearer tok-3" {
		t.Fatalf("after UnauthorizedHeader: %q", got)
	}
}

// blockingTokenServer answers only once release is closed.
func blockingTokenServer(t *testing.T) (*tokenServer, chan struct{}) {
	release := make(chan struct{})
	ts := newTokenServer(t, func(n int, _ tokenRequest) (int, string, string) {
		<-release
		return jsonToken(fmt.Sprintf("tok-%d", n), 3600)
	})
	return ts, release
}

func TestOAuthSingleFlight(t *testing.T) {
	ts, release := blockingTokenServer(t)
	r := mustNew(t, Options{OAuth: &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec"}})
	var wg sync.WaitGroup
	got := make([]string, 20)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := r.ForCall(context.Background(), fmt.Sprint("user", i), nil)
			if err != nil {
				t.Error(err)
				return
			}
			got[i] = h.Get("Authorization")
		}()
	}
	// All 20 wait for the one fetch, which has reached the endpoint, before
	// it answers.
	problem := waitWaiting(ts, 20)
	if problem == "" && ts.hits() != 1 {
		problem = fmt.Sprintf("20 callers waiting for a token made %d token requests, want 1", ts.hits())
	}
	close(release)
	if problem != "" {
		wg.Wait()
		t.Fatal(problem)
	}
	wg.Wait()
	for i, g := range got {
		if g != "Bearer tok-1" {
			t.Errorf("caller %d got %q", i, g)
		}
	}
	if ts.hits() != 1 {
		t.Fatalf("hits = %d, want 1", ts.hits())
	}
}

// waitWaiting waits (10s at most) until n callers wait for a token, in
// (*tokenSource).token, and the fetch they wait for has reached ts; else it
// says what it saw.
func waitWaiting(ts *tokenServer, n int) string {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stacks := string(buf[:runtime.Stack(buf, true)])
		waiting := strings.Count(stacks, "headers.(*tokenSource).token(")
		if waiting == n && ts.hits() > 0 {
			return ""
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("after 10s %d callers wait for a token (want %d), %d token requests arrived", waiting, n, ts.hits())
		}
		time.Sleep(time.Millisecond)
	}
}

// TestOAuthCancelledWaiter: a caller that gives up does not fail the fetch
// the others are waiting for.
func TestOAuthCancelledWaiter(t *testing.T) {
	ts, release := blockingTokenServer(t)
	r := mustNew(t, Options{Server: "srv", OAuth: &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec"}})
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := r.ForCall(ctx, "a", nil)
		first <- err
	}()
	for ts.hits() == 0 { // wait for the fetch to reach the endpoint
		time.Sleep(5 * time.Millisecond)
	}
	second := make(chan string, 1)
	go func() {
		h, err := r.ForCall(context.Background(), "b", nil)
		if err != nil {
			t.Error(err)
		}
		second <- h.Get("Authorization")
	}()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "MCP server 'srv'") {
		t.Fatalf("cancelled caller: %v", err)
	}
	close(release)
	if got := <-second; got != "Bearer tok-1" {
		t.Fatalf("second caller got %q", got)
	}
	if ts.hits() != 1 {
		t.Fatalf("hits = %d", ts.hits())
	}
}

func TestOAuthClose(t *testing.T) {
	ts, release := blockingTokenServer(t)
	defer close(release)
	r := mustNew(t, Options{OAuth: &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec"}})
	done := make(chan error, 1)
	go func() {
		_, err := r.Base(context.Background())
		done <- err
	}()
	for ts.hits() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	r.Close()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the fetch")
	}
}

func TestOAuthExtraParamsCannotOverride(t *testing.T) {
	ts := newTokenServer(t, numberedTokens)
	log, buf := testLogger()
	r := mustNew(t, Options{Logger: log, OAuth: &OAuthOptions{
		TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec", Scope: "real", AuthStyle: AuthStylePost,
		ExtraParams: map[string]string{
			"grant_type": "password", "Client_Secret": "other", "client_id": "other", "scope": "admin",
			"audience": "other", "refresh_token": "x", "resource": "https://r.example", "foo": "bar",
		},
	}})
	authz(t, r)
	f := ts.request(0).form
	want := url.Values{
		"grant_type": {"client_credentials"}, "client_id": {"id"}, "client_secret": {"sec"},
		"scope": {"real"}, "resource": {"https://r.example"}, "foo": {"bar"},
	}
	if fmt.Sprint(f) != fmt.Sprint(want) {
		t.Fatalf("form = %v\nwant   %v", f, want)
	}
	if !strings.Contains(buf.String(), "field=grant_type") || !strings.Contains(buf.String(), "field=Client_Secret") {
		t.Errorf("no warning for the reserved fields:\n%s", buf)
	}
}

func TestOAuthResponseFields(t *testing.T) {
	tests := []struct {
		name    string
		opts    OAuthOptions
		ct      string
		body    string
		want    string // Authorization, or the error text
		wantErr bool
	}{
		{"custom names", OAuthOptions{TokenField: "tok", TokenTypeField: "kind", ExpiresInField: "ttl"},
			"application/json", `{"tok":"abc","kind":"Token","ttl":"120"}`, "Token abc", false},
		{"custom token field missing though access_token is there", OAuthOptions{TokenField: "tok"},
			"application/json", `{"access_token":"abc"}`, "MCP server 'srv': OAuth token response missing 'tok'", true},
		{"default token type", OAuthOptions{DefaultTokenType: "MAC"},
			"application/json", `{"access_token":"abc"}`, "MAC abc", false},
		{"token type not normalized", OAuthOptions{},
			"application/json", `{"access_token":"abc","token_type":"bearer"}`, "bearer abc", false},
		{"odd expires_in is ignored", OAuthOptions{},
			"application/json", `{"access_token":"abc","expires_in":"soon"}`, "Bearer abc", false},
		{"fractional expires_in", OAuthOptions{},
			"application/json", `{"access_token":"abc","expires_in":59.5}`, "Bearer abc", false},
		{"form-encoded", OAuthOptions{TokenField: "t"},
			"application/x-www-form-urlencoded", `t=abc&token_type=Bearer&expires_in=60`, "Bearer abc", false},
		{"leading space kept inside the value", OAuthOptions{},
			"application/json", `{"access_token":" abc"}`, "Bearer  abc", false},
		{"missing access_token", OAuthOptions{},
			"application/json", `{"token_type":"Bearer"}`, "MCP server 'srv': OAuth token response missing 'access_token'", true},
		{"empty access_token", OAuthOptions{},
			"application/json", `{"access_token":""}`, "OAuth token response missing 'access_token'", true},
		{"non-string access_token", OAuthOptions{},
			"application/json", `{"access_token":42}`, "OAuth token response missing 'access_token'", true},
		{"error in a 200", OAuthOptions{},
			"application/json", `{"error":"invalid_grant"}`, "refused the request (HTTP 200): invalid_grant", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) { return http.StatusOK, tt.ct, tt.body })
			o := tt.opts
			o.TokenURL, o.ClientID, o.ClientSecret, o.AuthStyle = ts.URL, "id", "sec", AuthStyleBasic
			r := mustNew(t, Options{OAuth: &o})
			h, err := r.ForCall(context.Background(), "u", nil)
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Get("Authorization"); got != tt.want {
				t.Fatalf("Authorization = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestOAuthExpiresInDefault: no expires_in → 3600 s, so a 60 s skew keeps the
// token; expires_in 0 → 1 s, so it is refetched every time.
func TestOAuthExpiresInDefault(t *testing.T) {
	for _, tt := range []struct {
		body     string
		wantHits int
	}{
		{`{"access_token":"a"}`, 1},
		{`{"access_token":"a","expires_in":0}`, 3},
	} {
		ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) { return http.StatusOK, "application/json", tt.body })
		r := mustNew(t, Options{OAuth: &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec"}})
		for range 3 {
			authz(t, r)
		}
		if ts.hits() != tt.wantHits {
			t.Errorf("%s: hits = %d, want %d", tt.body, ts.hits(), tt.wantHits)
		}
	}
}

func TestOAuthFailures(t *testing.T) {
	const secretBody = "BODY-SECRET-q1w2e3"
	tests := []struct {
		name     string
		status   int
		ct, body string
		want     string
		deny     bool
	}{
		{"HTTP 500", 500, "text/plain", "internal error " + secretBody, "refused the request (HTTP 500)", false},
		{"HTTP 401 with error code", 401, "application/json",
			`{"error":"invalid_client","error_description":"` + secretBody + `"}`, "refused the request (HTTP 401): invalid_client", false},
		{"odd error code dropped", 400, "application/json", `{"error":"` + secretBody + ` x"}`, "refused the request (HTTP 400)", false},
		{"garbage", 200, "text/html", "<html>" + secretBody + "</html>", "returned a response that is neither a JSON object nor form-encoded", false},
		{"truncated json", 200, "application/json", `{"access_token":"` + secretBody, "neither a JSON object", false},
		{"json array", 200, "application/json", `["` + secretBody + `"]`, "neither a JSON object", false},
		{"illegal token", 200, "application/json", `{"access_token":"` + secretBody + `\r\nX-Evil: 1"}`,
			"OAuth token for MCP server 'srv' cannot be sent as an HTTP header value: the Authorization value contains a line break or another forbidden control character. Check what the token endpoint returned for this server.", true},
		{"non-ASCII token", 200, "application/json", `{"access_token":"` + secretBody + `\u00e9"}`,
			"the Authorization value contains characters outside ASCII", true},
		{"illegal token type", 200, "application/json", `{"access_token":"abc","token_type":"Bearer\n"}`,
			"the Authorization value contains a line break", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fail := true
			var mu sync.Mutex
			ts := newTokenServer(t, func(int, tokenRequest) (int, string, string) {
				mu.Lock()
				defer mu.Unlock()
				if fail {
					return tt.status, tt.ct, tt.body
				}
				return jsonToken("good", 3600)
			})
			r := mustNew(t, Options{OAuth: &OAuthOptions{TokenURL: ts.URL + "/token?key=" + secretBody, ClientID: "id", ClientSecret: "sec", AuthStyle: AuthStyleBasic}})
			_, err := r.ForCall(context.Background(), "u", nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v\nwant it to contain %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "'srv'") {
				t.Errorf("error %q does not name the server", err)
			}
			if strings.Contains(err.Error(), "q1w2e3") {
				t.Errorf("error %q leaks the response or URL secret", err)
			}
			var d *DenyError
			if errors.As(err, &d) != tt.deny {
				t.Errorf("DenyError = %v, want %v", errors.As(err, &d), tt.deny)
			}
			hb, err := r.Base(context.Background())
			if err == nil || len(hb) != 0 {
				t.Errorf("Base = %v, %v; want no headers and the error", hb, err)
			}
			// No negative caching: once the endpoint works, the next call succeeds.
			mu.Lock()
			fail = false
			mu.Unlock()
			if got := authz(t, r); got != "Bearer good" {
				t.Fatalf("after recovery: %q", got)
			}
			if ts.hits() != 3 {
				t.Errorf("hits = %d, want 3 (every failing call retries)", ts.hits())
			}
		})
	}
}

func TestOAuthEndpointDown(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	down := ts.URL + "/token"
	ts.Close()
	r := mustNew(t, Options{
		Static: map[string]string{"X-Static": "s"},
		OAuth:  &OAuthOptions{TokenURL: down, ClientID: "id", ClientSecret: "sec"},
	})
	_, err := r.ForCall(context.Background(), "u", nil)
	if err == nil || !strings.Contains(err.Error(), "MCP server 'srv': OAuth token request to "+down+" failed") {
		t.Fatalf("error = %v", err)
	}
	h, err := r.Base(context.Background())
	if err == nil {
		t.Fatal("Base hid the OAuth failure")
	}
	wantHeader(t, h, map[string]string{"X-Static": "s"}) // the caller may proceed with the static headers
}

func TestOAuthTimeout(t *testing.T) {
	ts, release := blockingTokenServer(t)
	defer close(release)
	r := mustNew(t, Options{
		HTTPClient: &http.Client{Timeout: 100 * time.Millisecond},
		OAuth:      &OAuthOptions{TokenURL: ts.URL, ClientID: "id", ClientSecret: "sec", AuthStyle: AuthStyleBasic},
	})
	_, err := r.ForCall(context.Background(), "u", nil)
	if err == nil || !strings.Contains(err.Error(), "OAuth token request to") {
		t.Fatalf("error = %v", err)
	}
}
