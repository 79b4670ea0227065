package accounts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/mcp-mux/mcp-mux/internal/headers"
)

// Bounds of the callback's query.
const (
	maxQuery    = 16 << 10
	maxStateLen = 4 << 10
	maxCodeLen  = 4 << 10
)

// Handler serves GET /oauth/callback and GET /oauth/client-metadata.json
// (paths relative to where it is mounted: the mux's root).
func (m *Manager) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /oauth/callback", m.callback)
	mux.HandleFunc("GET /oauth/client-metadata.json", m.clientMetadata)
	return mux
}

// clientMetadata serves the mux's Client ID Metadata Document.
func (m *Manager) clientMetadata(w http.ResponseWriter, _ *http.Request) {
	if m.cimd == "" {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "max-age=300")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"client_id": m.cimd, "client_name": "mcp-mux", "redirect_uris": []string{m.redirect},
		"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		"token_endpoint_auth_method": "none", "application_type": "web",
	})
}

// checkPublicURL checks the mux's public URL, returns it without a
// trailing slash and reports whether it is https (a client metadata
// document needs an https id).
func checkPublicURL(raw string) (string, bool, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", false, errors.New("accounts: the public URL must be an absolute http(s) URL without query or fragment")
	}
	return strings.TrimSuffix(raw, "/"), u.Scheme == "https", nil
}

// pages writes the callback's answers.
type pages struct{ tmpl *template.Template }

// newPages parses the callback's page.
func newPages() pages { return pages{template.Must(template.New("page").Parse(pageHTML))} }

// callbackQuery is the authorization response.
type callbackQuery struct {
	state, code, iss, errCode string
}

// parseCallback reads and bounds the authorization response's parameters.
func parseCallback(raw string) (callbackQuery, error) {
	if len(raw) > maxQuery {
		return callbackQuery{}, errors.New("the request is too long")
	}
	v, err := url.ParseQuery(raw)
	if err != nil {
		return callbackQuery{}, errors.New("the query does not parse")
	}
	for _, k := range []string{"state", "code", "iss", "error"} {
		if len(v[k]) > 1 {
			return callbackQuery{}, fmt.Errorf("the parameter %s is repeated", k)
		}
	}
	q := callbackQuery{state: v.Get("state"), code: v.Get("code"), iss: v.Get("iss"), errCode: v.Get("error")}
	switch {
	case q.state == "":
		return q, errors.New("the state parameter is missing")
	case len(q.state) > maxStateLen || len(q.code) > maxCodeLen || len(q.iss) > maxStateLen:
		return q, errors.New("a parameter is too long")
	case q.code == "" && q.errCode == "":
		return q, errors.New("neither a code nor an error came back")
	}
	return q, nil
}

// callback completes a consent: state, single use, RFC 9207 iss, the code
// exchange, the vault; then it wakes the waiting call.
func (m *Manager) callback(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet { // a HEAD must not use up the consent
		w.Header().Set("Allow", http.MethodGet)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	q, err := parseCallback(r.URL.RawQuery)
	if err != nil {
		m.pages.write(w, http.StatusBadRequest, "", "This authorization response is invalid: "+err.Error()+".")
		return
	}
	b, err := m.state.Open(q.state, "")
	var sd stateData
	if err != nil || json.Unmarshal(b, &sd) != nil || !validID(sd.ID) {
		m.pages.write(w, http.StatusBadRequest, "", "This authorization response's state is invalid or has expired. Start again from your MCP client.")
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*defaultTimeout)
	defer cancel()
	p, err := m.take(ctx, sd)
	if err != nil {
		m.log.Error("taking a pending consent", "err", err)
		m.pages.write(w, http.StatusServiceUnavailable, "", "The consent could not be read; try again.")
		return
	}
	if p == nil {
		m.pages.write(w, http.StatusBadRequest, "", "This consent was already used or has expired. Start again from your MCP client.")
		return
	}
	o := m.complete(ctx, p, q)
	m.finish(ctx, p.ID, p.Server, o)
	if o.Reason != "" {
		m.pages.write(w, http.StatusBadRequest, p.Server, "Could not connect "+p.Server+": "+o.Message+".")
		return
	}
	m.pages.write(w, http.StatusOK, p.Server, "Connected "+p.Server+". You can close this window.")
}

// take reads and deletes a pending record; nil when it is gone.
func (m *Manager) take(ctx context.Context, sd stateData) (*pending, error) {
	b, err := m.store.takePending(ctx, sd.UH, sd.ID)
	if err != nil || b == nil {
		return nil, err
	}
	var p pending
	if err := openJSON(m.vault, "pending\x00"+sd.ID, b, &p); err != nil || p.ID != sd.ID {
		return nil, nil // not ours: as good as gone
	}
	if m.userHash(p.User) != sd.UH {
		return nil, nil
	}
	return &p, nil
}

// complete checks the authorization response and exchanges its code.
func (m *Manager) complete(ctx context.Context, p *pending, q callbackQuery) outcome {
	if _, ok := m.server(p.Server); !ok {
		return outcome{Reason: "removed", Message: "the server was removed from the configuration"}
	}
	if q.errCode != "" {
		msg := "the authorization server refused"
		if code := headers.SafeErrorCode(q.errCode); code == "access_denied" {
			msg = "access was denied"
		} else if code != "" {
			msg += " (" + code + ")"
		}
		return outcome{Reason: "denied", Message: msg}
	}
	if msg := checkIss(q.iss, p.Issuer, p.IssSupported); msg != "" {
		return outcome{Reason: "iss", Message: msg}
	}
	tok, err := oauthConfig(p, m.redirect).Exchange(context.WithValue(ctx, oauth2.HTTPClient, m.direct), q.code,
		oauth2.VerifierOption(p.Verifier), oauth2.SetAuthURLParam("resource", p.Resource))
	if err != nil {
		return outcome{Reason: "exchange", Message: tokenFailure("the code exchange", err)}
	}
	e, msg := newEntry(tok, p)
	if msg != "" {
		return outcome{Reason: "exchange", Message: msg}
	}
	if err := m.save(ctx, m.userHash(p.User), p.Server, e); err != nil {
		m.log.Error("storing a connected account's tokens", "server", p.Server, "err", err)
		return outcome{Reason: "exchange", Message: "the tokens could not be stored"}
	}
	return outcome{}
}

// checkIss applies RFC 9207 to the response's iss: required and equal when
// the issuer advertises it, equal when present; compared exactly.
func checkIss(iss, issuer string, advertised bool) string {
	switch {
	case advertised && iss == "":
		return "the authorization response has no iss though its issuer sends one"
	case iss != "" && iss != issuer:
		return "the authorization response's iss is not its issuer"
	}
	return ""
}

// pageHTML is the callback's answer.
const pageHTML = `<!doctype html>
<html><head><meta charset="utf-8"><title>mcp-mux{{if .Server}}: {{.Server}}{{end}}</title></head>
<body><p>{{.Message}}</p></body></html>
`

// page writes the callback's answer: never a code or token, not cached,
// no referrer (the code is in the URL).
func (p pages) write(w http.ResponseWriter, status int, server, message string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = p.tmpl.Execute(w, struct{ Server, Message string }{server, message})
}

// outcome is how a consent ended: Reason "" is success; else one of the
// failure reasons of Stats and a message safe to show.
type outcome struct {
	Reason  string `json:"r,omitempty"`
	Message string `json:"m,omitempty"`
	Pending bool   `json:"p,omitempty"`
	Expires int64  `json:"e,omitempty"` // of a pending consent, unix ms
}

// mark records a consent as pending, so Result can tell it from an
// unknown one and see it expire.
func (m *Manager) mark(ctx context.Context, id string, expires time.Time) error {
	b, _ := jsonBytes(outcome{Pending: true, Expires: expires.UnixMilli()})
	return m.store.putResult(ctx, id, b, m.o.StateTTL+resultGrace, false)
}

// finish stores a consent's outcome and wakes its waiters.
func (m *Manager) finish(ctx context.Context, id, server string, o outcome) {
	m.mu.Lock()
	delete(m.local, id)
	m.mu.Unlock()
	if server != "" {
		m.tally.outcome(server, o.Reason)
	}
	b, _ := jsonBytes(o)
	if err := m.store.putResult(ctx, id, b, m.o.StateTTL, true); err != nil {
		m.log.Error("storing a consent's outcome; its call waits until the consent expires", "server", server, "err", err)
	}
}

// ConsentError is how a consent failed; Reason is one of Stats' reasons.
type ConsentError struct{ Reason, Message string }

// Error implements error.
func (e *ConsentError) Error() string { return "the consent failed: " + e.Message }

// Result reports, without waiting, whether the consent id has finished and
// how: done with nil (connected) or an error (a *ConsentError: denied,
// expired, the exchange failed…).
func (m *Manager) Result(ctx context.Context, id string) (bool, error) {
	if !validID(id) {
		return true, &ConsentError{Reason: "state", Message: "unknown consent"}
	}
	b, err := m.store.result(ctx, id)
	if err != nil {
		return false, err
	}
	var o outcome
	switch {
	case b == nil || json.Unmarshal(b, &o) != nil:
		o = outcome{Reason: "expired", Message: "the consent is unknown or has expired"}
	case o.Pending && m.o.Now().UnixMilli() > o.Expires+resultGrace.Milliseconds():
		o = outcome{Reason: "expired", Message: "the consent has expired"}
	case o.Pending:
		return false, nil
	}
	m.forget(id, o.Reason == "expired")
	if o.Reason != "" {
		return true, &ConsentError{Reason: o.Reason, Message: o.Message}
	}
	return true, nil
}

// Wait blocks until the consent id has finished (nil: connected; else a
// *ConsentError) or ctx ends. The callback's replica wakes it; it also
// re-checks every second, for a lost wake-up.
func (m *Manager) Wait(ctx context.Context, id string) error {
	for {
		ch := m.waits.add(id)
		done, err := m.Result(ctx, id)
		if done || (err != nil && ctx.Err() != nil) {
			m.waits.remove(id, ch)
			return err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			m.waits.remove(id, ch)
			return ctx.Err()
		}
		t.Stop()
		m.waits.remove(id, ch)
	}
}

// waiters are the local Waits, by consent id. It is safe for concurrent
// use.
type waiters struct {
	mu sync.Mutex
	by map[string][]chan struct{}
}

// add registers a waiter of id; wake closes its channel.
func (w *waiters) add(id string) chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.by == nil {
		w.by = map[string][]chan struct{}{}
	}
	w.by[id] = append(w.by[id], ch)
	return ch
}

// wake wakes the waiters of id.
func (w *waiters) wake(id string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ch := range w.by[id] {
		close(ch)
	}
	delete(w.by, id)
}

// remove drops a waiter's channel.
func (w *waiters) remove(id string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	chs := slices.DeleteFunc(w.by[id], func(c chan struct{}) bool { return c == ch })
	if len(chs) == 0 {
		delete(w.by, id)
	} else {
		w.by[id] = chs
	}
}

// tokenFailure describes a failed token request without the response,
// which x/oauth2's RetrieveError quotes: the HTTP status and a safe error
// code at most.
func tokenFailure(what string, err error) string {
	var re *oauth2.RetrieveError
	switch {
	case errors.As(err, &re):
		msg := what + " was refused"
		if re.Response != nil {
			msg += fmt.Sprintf(" (HTTP %d)", re.Response.StatusCode)
		}
		if code := headers.SafeErrorCode(re.ErrorCode); code != "" {
			msg += ": " + code
		}
		return msg
	case errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Client.Timeout"):
		return what + " timed out"
	case strings.Contains(err.Error(), "follows no redirect"):
		return what + " was redirected, and mcp-mux follows no redirect on a credential request"
	case strings.Contains(err.Error(), "cannot parse") || strings.Contains(err.Error(), "missing access_token"):
		return what + " answered no usable token (malformed, or over 1 MiB)"
	}
	return what + " failed"
}
