package accounts

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Marker values: none may appear in a log line or an error's text.
const (
	markerSecret  = "MARKER-CLIENT-SECRET-f00d"
	markerAccess  = "MARKER-ACCESS-"
	markerRefresh = "MARKER-REFRESH-"
	markerCode    = "MARKER-CODE-"
)

// fixture is a protected MCP server and its authorization server in one
// httptest server, each behaviour switchable, recording what it was sent.
type fixture struct {
	t   *testing.T
	srv *httptest.Server

	mu sync.Mutex
	// knobs
	issuerPath     string   // the issuer's path ("" = the origin)
	issuerOverride string   // metadata's issuer ("" = the real one)
	issSupported   bool     // authorization_response_iss_parameter_supported
	issMode        string   // "" (send when supported), "none", "right", "wrong", "normalized"
	authMethods    []string // token_endpoint_auth_methods_supported
	cimd           bool
	noRegistration bool
	asScopes       []string
	prmScopes      []string
	challengeScope string
	prmResource    string // "" = the real one
	expiresIn      int
	tokenMode      string // "", "redirect", "huge", "slow"
	refreshMode    string // "", "invalid_grant"
	refreshDelay   time.Duration
	deny           bool
	insufficient   string // scope a call with a token is refused 403 for
	// records
	requests   int
	authorizes []url.Values
	tokenReqs  []tokenReq
	registered []map[string]any
	refreshes  int
	n          int
	codes      map[string]codeGrant
	access     map[string]bool // valid access tokens
	refresh    map[string]bool // valid refresh tokens
	verifiers  []string
}

type tokenReq struct {
	form  url.Values
	basic string // "id:secret" of a Basic header
}

type codeGrant struct{ challenge, resource, scope, client string }

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, authMethods: []string{"client_secret_basic"}, expiresIn: 3600,
		codes: map[string]codeGrant{}, access: map[string]bool{}, refresh: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) url() string           { return f.srv.URL + "/mcp" }
func (f *fixture) issuer() string        { return f.srv.URL + f.issuerPath }
func (f *fixture) count() int            { f.mu.Lock(); defer f.mu.Unlock(); return f.requests }
func (f *fixture) set(fn func(*fixture)) { f.mu.Lock(); defer f.mu.Unlock(); fn(f) }

func (f *fixture) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests++
	f.mu.Unlock()
	p := r.URL.Path
	switch {
	case p == "/mcp":
		f.mcp(w, r)
	case p == "/.well-known/oauth-protected-resource/mcp":
		f.prm(w)
	case p == "/.well-known/oauth-authorization-server"+f.issuerPath:
		f.asMeta(w)
	case p == "/authorize":
		f.authorize(w, r)
	case p == "/token":
		f.token(w, r)
	case p == "/register":
		f.register(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (f *fixture) mcp(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if f.access[tok] {
		if f.insufficient != "" {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q`, f.insufficient))
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
		return
	}
	ch := fmt.Sprintf(`Bearer error="invalid_token", resource_metadata=%q`, f.srv.URL+"/.well-known/oauth-protected-resource/mcp")
	if f.challengeScope != "" {
		ch += fmt.Sprintf(`, scope=%q`, f.challengeScope)
	}
	w.Header().Set("WWW-Authenticate", ch)
	w.WriteHeader(http.StatusUnauthorized)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (f *fixture) prm(w http.ResponseWriter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	writeJSON(w, 200, map[string]any{"resource": cmp.Or(f.prmResource, f.url()), "authorization_servers": []string{f.issuer()}, "scopes_supported": f.prmScopes})
}

func (f *fixture) asMeta(w http.ResponseWriter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := map[string]any{
		"issuer": cmp.Or(f.issuerOverride, f.issuer()), "authorization_endpoint": f.srv.URL + "/authorize", "token_endpoint": f.srv.URL + "/token",
		"response_types_supported": []string{"code"}, "code_challenge_methods_supported": []string{"S256"},
		"token_endpoint_auth_methods_supported": f.authMethods, "scopes_supported": f.asScopes,
		"authorization_response_iss_parameter_supported": f.issSupported, "client_id_metadata_document_supported": f.cimd,
	}
	if !f.noRegistration {
		m["registration_endpoint"] = f.srv.URL + "/register"
	}
	writeJSON(w, 200, m)
}

func (f *fixture) authorize(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := r.URL.Query()
	f.authorizes = append(f.authorizes, q)
	back, err := url.Parse(q.Get("redirect_uri"))
	if err != nil || q.Get("code_challenge_method") != "S256" {
		http.Error(w, "bad request", 400)
		return
	}
	out := url.Values{"state": {q.Get("state")}}
	if f.deny {
		out.Set("error", "access_denied")
	} else {
		f.n++
		code := fmt.Sprintf("%s%d", markerCode, f.n)
		f.codes[code] = codeGrant{q.Get("code_challenge"), q.Get("resource"), q.Get("scope"), q.Get("client_id")}
		out.Set("code", code)
	}
	switch f.issMode {
	case "":
		if f.issSupported {
			out.Set("iss", f.issuer())
		}
	case "right":
		out.Set("iss", f.issuer())
	case "wrong":
		out.Set("iss", "https://attacker.example.com")
	case "normalized":
		out.Set("iss", f.issuer()+"/")
	}
	back.RawQuery = out.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

func (f *fixture) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	mode, delay := f.tokenMode, f.refreshDelay
	req := tokenReq{form: r.PostForm}
	if id, sec, ok := r.BasicAuth(); ok {
		req.basic = id + ":" + sec
	}
	f.tokenReqs = append(f.tokenReqs, req)
	f.mu.Unlock()
	switch mode {
	case "redirect":
		http.Redirect(w, r, f.srv.URL+"/elsewhere", http.StatusTemporaryRedirect)
		return
	case "huge":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"%s","token_type":"Bearer","pad":"%s"}`, markerAccess+"huge", strings.Repeat("x", 2<<20))
		return
	case "slow":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		fmt.Fprint(w, `{"access_token":"`)
		w.(http.Flusher).Flush()
		select {
		case <-time.After(3 * time.Second):
		case <-r.Context().Done():
		}
		return
	}
	if r.PostForm.Get("grant_type") == "refresh_token" {
		time.Sleep(delay)
		f.refreshGrant(w, r.PostForm)
		return
	}
	f.codeGrant(w, r.PostForm)
}

func (f *fixture) codeGrant(w http.ResponseWriter, form url.Values) {
	f.mu.Lock()
	defer f.mu.Unlock()
	g, ok := f.codes[form.Get("code")]
	delete(f.codes, form.Get("code"))
	f.verifiers = append(f.verifiers, form.Get("code_verifier"))
	sum := sha256.Sum256([]byte(form.Get("code_verifier")))
	if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || form.Get("resource") != g.resource {
		writeJSON(w, 400, map[string]string{"error": "invalid_grant", "error_description": "MARKER-ACCESS-in-description"})
		return
	}
	f.issue(w, g.scope)
}

func (f *fixture) refreshGrant(w http.ResponseWriter, form url.Values) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refreshes++
	rt := form.Get("refresh_token")
	if f.refreshMode == "invalid_grant" || !f.refresh[rt] || form.Get("resource") != f.url() {
		writeJSON(w, 400, map[string]string{"error": "invalid_grant"})
		return
	}
	delete(f.refresh, rt) // rotated
	f.issue(w, "")
}

// issue answers a token; f.mu is held.
func (f *fixture) issue(w http.ResponseWriter, scope string) {
	f.n++
	a, rt := fmt.Sprintf("%s%d", markerAccess, f.n), fmt.Sprintf("%s%d", markerRefresh, f.n)
	f.access[a], f.refresh[rt] = true, true
	body := map[string]any{"access_token": a, "token_type": "Bearer", "refresh_token": rt, "expires_in": f.expiresIn}
	if scope != "" {
		body["scope"] = scope
	}
	writeJSON(w, 200, body)
}

func (f *fixture) register(w http.ResponseWriter, r *http.Request) {
	var m map[string]any
	_ = json.NewDecoder(r.Body).Decode(&m)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registered = append(f.registered, m)
	out := map[string]any{"client_id": fmt.Sprintf("dyn-client-%d", len(f.registered)), "token_endpoint_auth_method": m["token_endpoint_auth_method"]}
	if m["token_endpoint_auth_method"] != "none" {
		out["client_secret"] = markerSecret
	}
	writeJSON(w, 201, out)
}

// noMarkers fails the test if a secret marker is in the log or an error.
func (e *env) noMarkers() {
	text := e.log.String()
	e.emu.Lock()
	for _, err := range e.errs {
		text += "\n" + err.Error()
	}
	e.emu.Unlock()
	e.f.mu.Lock()
	vs := append([]string(nil), e.f.verifiers...)
	e.f.mu.Unlock()
	for _, mk := range append([]string{markerSecret, markerAccess, markerRefresh, markerCode}, vs...) {
		if mk != "" && strings.Contains(text, mk) {
			e.t.Errorf("secret marker %q leaked into the log or an error:\n%s", mk, text)
		}
	}
}
