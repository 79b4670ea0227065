package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// fakeAccounts is an Accounts whose consents complete when the test says.
type fakeAccounts struct {
	mu       sync.Mutex
	detected map[string]bool
	tokens   map[string]string // user+"/"+server → token
	started  []string          // the step-up scopes of each Start, joined
	renew    Renewal           // what Rejected answers
	rejected int
	done     map[string]bool // consent id → completed
	wakeup   chan struct{}   // closed to complete every consent
	waits    int
	expires  time.Time // when set, every consent's expiry
}

func newFakeAccounts() *fakeAccounts {
	return &fakeAccounts{tokens: map[string]string{}, done: map[string]bool{}, wakeup: make(chan struct{}), detected: map[string]bool{}}
}

func (f *fakeAccounts) Detected(server string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.detected[server]
}

func (f *fakeAccounts) Detect(server string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.detected[server] = true
}

func (f *fakeAccounts) Token(_ context.Context, user, server string) (secret.Value, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok, ok := f.tokens[user+"/"+server]
	return secret.Value(tok), ok, nil
}

func (f *fakeAccounts) Rejected(_ context.Context, user, server string, _ secret.Value, _ *upstream.StatusError) (Renewal, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rejected++
	if !f.renew.Again {
		delete(f.tokens, user+"/"+server)
	}
	return f.renew, nil
}

func (f *fakeAccounts) Start(_ context.Context, user, server string, _ *upstream.StatusError, stepUp []string) (*Consent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("c%d", len(f.started))
	f.started = append(f.started, strings.Join(stepUp, " "))
	go func() { // the browser comes back once the test says so
		<-f.wakeup
		f.mu.Lock()
		f.tokens[user+"/"+server] = "tok-" + id
		f.done[id] = true
		f.mu.Unlock()
	}()
	exp := time.Now().Add(time.Minute)
	if !f.expires.IsZero() {
		exp = f.expires
	}
	return &Consent{ID: id, URL: "https://as.example/authorize?state=" + id, Expires: exp}, nil
}

func (f *fakeAccounts) Wait(ctx context.Context, user, id string) error {
	f.mu.Lock()
	f.waits++
	f.mu.Unlock()
	for {
		if done, _ := f.Result(ctx, user, id); done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (f *fakeAccounts) Result(_ context.Context, _, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done[id], nil
}

func (f *fakeAccounts) Disconnect(_ context.Context, user, server string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, had := f.tokens[user+"/"+server]
	delete(f.tokens, user+"/"+server)
	return had, nil
}

// askSink answers elicitation/create with action and records what it was
// asked and told.
type askSink struct {
	action string
	mu     sync.Mutex
	asked  []mcp.ElicitParams
	told   []string
	onAsk  func()
}

func (k *askSink) Notify(method string, params json.RawMessage) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.told = append(k.told, method+" "+string(params))
}

func (k *askSink) Request(_ context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	var p mcp.ElicitParams
	if method != "elicitation/create" || json.Unmarshal(params, &p) != nil {
		return nil, fmt.Errorf("unexpected %s", method)
	}
	k.mu.Lock()
	k.asked = append(k.asked, p)
	k.mu.Unlock()
	if k.onAsk != nil {
		k.onAsk()
	}
	return json.Marshal(map[string]string{"action": k.action})
}

func (k *askSink) Session() *Session { return nil }

// accountCall is testCall to a connected-account server, from a session
// whose client declared URL-mode elicitation when url.
func accountCall(url bool) *Call {
	c := testCall()
	c.Backend.PerUser = true
	c.Upward = json.RawMessage(`{"name":"t","arguments":{"q":1}}`)
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}}
	if url {
		caps.Elicitation.URL = &mcp.URLElicitationCapabilities{}
	}
	c.Session.ClientCaps = caps
	return c
}

// sentWith is a next step that records the Authorization and session key
// of each call it gets and answers with results in turn (the last again).
type sentWith struct {
	mu      sync.Mutex
	auth    []string
	creds   []string
	answers []error
}

func (n *sentWith) next(_ context.Context, c *Call) (json.RawMessage, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.auth = append(n.auth, c.upHeader.Get("Authorization"))
	n.creds = append(n.creds, c.Key.Cred)
	var err error
	if i := len(n.auth) - 1; i < len(n.answers) {
		err = n.answers[i]
	}
	if err != nil {
		return nil, err
	}
	return json.RawMessage(`{"content":[]}`), nil
}

// TestAccountsStageConnected: a connected caller's call carries their
// token, and its upstream session is keyed by the caller, not the token;
// a server without connected accounts is passed by.
func TestAccountsStageConnected(t *testing.T) {
	acc := newFakeAccounts()
	acc.tokens["alice/s"] = "tok-a"
	s := testRouter(t, Options{Accounts: acc})
	n := &sentWith{}
	if _, err := accountsStage(s).Wrap(n.next)(t.Context(), accountCall(true)); err != nil {
		t.Fatal(err)
	}
	acc.tokens["alice/s"] = "tok-b" // refreshed
	if _, err := accountsStage(s).Wrap(n.next)(t.Context(), accountCall(true)); err != nil {
		t.Fatal(err)
	}
	if n.auth[0] != "Bearer tok-a" || n.auth[1] != "Bearer tok-b" || n.creds[0] == "" || n.creds[0] != n.creds[1] {
		t.Fatalf("sent %q with keys %q", n.auth, n.creds)
	}
	plain := testCall()
	if _, err := accountsStage(s).Wrap(n.next)(t.Context(), plain); err != nil || n.auth[2] != "" {
		t.Fatalf("a plain server's call: %v, sent %q", err, n.auth)
	}
}

// TestAccountsStageLegacyConsent: a 2025-11-25 caller with no token is
// asked live with a URL-mode elicitation; the call waits for the
// callback, tells the client the elicitation completed, and goes on with
// the new token. Declined, nothing is sent and the model reads why.
func TestAccountsStageLegacyConsent(t *testing.T) {
	acc := newFakeAccounts()
	s := testRouter(t, Options{Accounts: acc})
	k := &askSink{action: "accept", onAsk: func() { close(acc.wakeup) }}
	c := accountCall(true)
	c.Sink = k
	n := &sentWith{}
	raw, err := accountsStage(s).Wrap(n.next)(t.Context(), c)
	if err != nil || wire.IsToolError(raw) {
		t.Fatalf("consented call: %s, %v", raw, err)
	}
	if len(k.asked) != 1 || k.asked[0].Mode != "url" || k.asked[0].URL != "https://as.example/authorize?state=c0" || k.asked[0].ElicitationID != "c0" {
		t.Fatalf("asked %+v", k.asked)
	}
	if len(k.told) != 1 || k.told[0] != `notifications/elicitation/complete {"elicitationId":"c0"}` {
		t.Fatalf("told %q", k.told)
	}
	if len(n.auth) != 1 || n.auth[0] != "Bearer tok-c0" {
		t.Fatalf("sent %q", n.auth)
	}
	if strings.Contains(string(n.auth[0]), "inputResponses") {
		t.Fatal("the consent's answer went upstream")
	}

	declined := &askSink{action: "decline"}
	c = accountCall(true)
	c.Caller = NewCaller("bob", "")
	c.Sink = declined
	raw, err = accountsStage(s).Wrap(n.next)(t.Context(), c)
	if err != nil || !wire.IsToolError(raw) || !strings.Contains(string(raw), "was declined") || len(n.auth) != 1 {
		t.Fatalf("declined: %s, %v, sent %d", raw, err, len(n.auth))
	}
}

// TestAccountsStageNoURLClient: a client that can show no URL gets
// -32042 with the URL in its data, and nothing is sent.
func TestAccountsStageNoURLClient(t *testing.T) {
	s := testRouter(t, Options{Accounts: newFakeAccounts()})
	n := &sentWith{}
	_, err := accountsStage(s).Wrap(n.next)(t.Context(), accountCall(false))
	r, ok := errors.AsType[refusal](err)
	if !ok || r.err.Code != mcp.CodeURLElicitationRequired || !strings.Contains(string(r.err.Data), "https://as.example/authorize?state=c0") {
		t.Fatalf("err %v", err)
	}
	if len(n.auth) != 0 {
		t.Fatal("a call without a token was sent")
	}
}

// modernRetry is a 2026-07-28 era whose Retry puts answers in as the
// client sent them and whose Fulfil returns an input_required as is.
type modernRetry struct {
	LegacyEra
	responses json.RawMessage
	state     string
}

func (e *modernRetry) Retry(params json.RawMessage) json.RawMessage {
	return RetryParams(params, e.responses, e.state)
}

func (*modernRetry) Fulfil(_ context.Context, _ Sink, _, raw json.RawMessage, _ SendFunc) (json.RawMessage, error) {
	return raw, nil
}

// TestAccountsStageModernConsent: a 2026-07-28 caller gets an
// input_required carrying the URL elicitation, its requestState naming
// the consent; the retry that accepted goes on once the consent
// completed, with the answer taken out of what goes upstream.
func TestAccountsStageModernConsent(t *testing.T) {
	acc := newFakeAccounts()
	s := testRouter(t, Options{Accounts: acc})
	c := accountCall(true)
	c.Era = &modernRetry{}
	n := &sentWith{}
	raw, err := accountsStage(s).Wrap(n.next)(t.Context(), c)
	ir, ok := AsInputRequired(raw)
	if err != nil || !ok || ir.RequestState != consentPrefix+"c0" || len(n.auth) != 0 {
		t.Fatalf("first round: %s, %v", raw, err)
	}
	var req InputRequest
	_ = json.Unmarshal(ir.InputRequests[consentInput], &req)
	if req.Method != "elicitation/create" || !strings.Contains(string(req.Params), `"mode":"url"`) {
		t.Fatalf("input request %s", ir.InputRequests[consentInput])
	}
	close(acc.wakeup)
	era := &modernRetry{responses: json.RawMessage(`{"` + consentInput + `":{"action":"accept"}}`), state: ir.RequestState}
	c = accountCall(true)
	c.Era = era
	c.Upward = era.Retry(c.Upward) // the arguments stage's doing
	var upward json.RawMessage
	raw, err = accountsStage(s).Wrap(func(ctx context.Context, c *Call) (json.RawMessage, error) {
		upward = c.Upward
		return n.next(ctx, c)
	})(t.Context(), c)
	if err != nil || wire.IsToolError(raw) || len(n.auth) != 1 || n.auth[0] != "Bearer tok-c0" {
		t.Fatalf("retry: %s, %v, sent %q", raw, err, n.auth)
	}
	if strings.Contains(string(upward), "requestState") || strings.Contains(string(upward), "inputResponses") {
		t.Fatalf("the consent's answer went upstream: %s", upward)
	}
}

// TestAccountsStageRefusals: a 401 on a token that renews is sent again
// once; a 403 asking for more scopes starts a consent with them; and a
// server that keeps refusing gets no more than maxConsents consents.
func TestAccountsStageRefusals(t *testing.T) {
	unauthorized := &upstream.StatusError{Code: http.StatusUnauthorized}
	t.Run("renewed", func(t *testing.T) {
		acc := newFakeAccounts()
		acc.tokens["alice/s"] = "old"
		acc.renew = Renewal{Again: true}
		s := testRouter(t, Options{Accounts: acc})
		n := &sentWith{answers: []error{unauthorized, nil}}
		raw, err := accountsStage(s).Wrap(n.next)(t.Context(), accountCall(true))
		if err != nil || len(n.auth) != 2 || acc.rejected != 1 || len(acc.started) != 0 {
			t.Fatalf("%s, %v: sent %d, rejected %d, started %d", raw, err, len(n.auth), acc.rejected, len(acc.started))
		}
	})
	t.Run("step up, then the limit", func(t *testing.T) {
		acc := newFakeAccounts()
		acc.tokens["alice/s"] = "basic"
		acc.renew = Renewal{StepUp: []string{"mcp:basic", "mcp:write"}}
		close(acc.wakeup)
		s := testRouter(t, Options{Accounts: acc})
		forbidden := &upstream.StatusError{Code: http.StatusForbidden}
		n := &sentWith{answers: []error{forbidden, forbidden, forbidden, forbidden}}
		c := accountCall(true)
		c.Sink = &askSink{action: "accept"}
		raw, err := accountsStage(s).Wrap(n.next)(t.Context(), c)
		if err != nil || !wire.IsToolError(raw) || !strings.Contains(string(raw), "after 2 authorizations") {
			t.Fatalf("%s, %v", raw, err)
		}
		if len(acc.started) != maxConsents || acc.started[0] != "mcp:basic mcp:write" || len(n.auth) != maxConsents+1 {
			t.Fatalf("started %q, sent %d", acc.started, len(n.auth))
		}
	})
}

// TestAccountsStageEndings: however the call ends — answered, failed,
// cancelled, its client gone — the stage returns what next did and
// starts no consent.
func TestAccountsStageEndings(t *testing.T) {
	for _, e := range endings {
		t.Run(e.name, func(t *testing.T) {
			acc := newFakeAccounts()
			acc.tokens["alice/s"] = "tok"
			s := testRouter(t, Options{Accounts: acc})
			raw, err := runEnding(t, accountsStage(s), e, accountCall(true))
			switch e.name {
			case "success":
				if err != nil || raw == nil {
					t.Fatalf("%s, %v", raw, err)
				}
			default:
				if err == nil {
					t.Fatalf("%s: no error", raw)
				}
			}
			if len(acc.started) != 0 {
				t.Fatal("a consent started")
			}
		})
	}
}

// TestConnectAccountTool: connect_account connects (asking for consent),
// says so when already connected, disconnects, and names the servers it
// knows for a wrong one (never repeating a long name).
func TestConnectAccountTool(t *testing.T) {
	acc := newFakeAccounts()
	s := testRouter(t, Options{Accounts: acc})
	rt := s.rt.Load()
	b := &Backend{Name: "gh", PerUser: true}
	rt.Add(b)
	call := func(args string, k Sink) (json.RawMessage, error) {
		c := accountCall(true)
		c.Runtime, c.Route, c.Backend, c.Args, c.Sink = rt, &Route{Name: ConnectAccountName, Builtin: true}, nil, json.RawMessage(args), k
		c.Upward = nil
		return s.connectAccount(t.Context(), c)
	}
	k := &askSink{action: "accept", onAsk: func() { close(acc.wakeup) }}
	raw, err := call(`{"server":"gh"}`, k)
	if err != nil || !strings.Contains(string(raw), `is connected`) || len(k.asked) != 1 || acc.tokens["alice/gh"] != "tok-c0" {
		t.Fatalf("connect: %s, %v, asked %d", raw, err, len(k.asked))
	}
	if raw, _ = call(`{"server":"gh"}`, k); !strings.Contains(string(raw), "is connected") || len(k.asked) != 1 {
		t.Fatalf("already connected: %s, asked %d", raw, len(k.asked))
	}
	if raw, _ = call(`{"server":"gh","disconnect":true}`, k); !strings.Contains(string(raw), "is disconnected") || acc.tokens["alice/gh"] != "" {
		t.Fatalf("disconnect: %s", raw)
	}
	long := strings.Repeat("x", 4000)
	raw, _ = call(`{"server":"`+long+`"}`, k)
	if !wire.IsToolError(raw) || strings.Contains(string(raw), long) || !strings.Contains(string(raw), `\"gh\"`) {
		t.Fatalf("unknown server: %s", raw)
	}
}

// TestAccountsStageDetects: a server configured with no credentials is
// passed by until it answers 401 with a Bearer challenge; from then on its
// callers connect their accounts (here: asked at once, then sent with the
// token). A 401 without a Bearer challenge, or a 403, detects nothing.
func TestAccountsStageDetects(t *testing.T) {
	acc := newFakeAccounts()
	close(acc.wakeup)
	s := testRouter(t, Options{Accounts: acc})
	detectCall := func() *Call {
		c := accountCall(true)
		c.Backend.PerUser, c.Backend.Detect = false, true
		c.Sink = &askSink{action: "accept"}
		return c
	}
	basic := &upstream.StatusError{Code: http.StatusUnauthorized, Challenges: []string{`Basic realm="x"`}}
	n := &sentWith{answers: []error{basic}}
	if _, err := accountsStage(s).Wrap(n.next)(t.Context(), detectCall()); !errors.Is(err, basic) || acc.Detected("s") {
		t.Fatalf("a Basic challenge: %v, detected %v", err, acc.Detected("s"))
	}
	bearer := &upstream.StatusError{Code: http.StatusUnauthorized, Challenges: []string{`Bearer resource_metadata="https://s.example/.well-known/oauth-protected-resource"`}}
	n = &sentWith{answers: []error{bearer, nil}}
	raw, err := accountsStage(s).Wrap(n.next)(t.Context(), detectCall())
	if err != nil || wire.IsToolError(raw) || !acc.Detected("s") {
		t.Fatalf("a Bearer challenge: %s, %v, detected %v", raw, err, acc.Detected("s"))
	}
	if len(n.auth) != 2 || n.auth[0] != "" || n.auth[1] != "Bearer tok-c0" {
		t.Fatalf("sent %q", n.auth)
	}
}

// TestAccountsStageLegacyConsentExpires: a 2025-11-25 call waits for its
// consent no longer than the consent lives (and its grace): a browser that
// never comes back ends the call with a tool error saying to call again,
// and nothing is sent.
func TestAccountsStageLegacyConsentExpires(t *testing.T) {
	acc := newFakeAccounts()
	acc.expires = time.Now().Add(-consentGrace + 200*time.Millisecond)
	s := testRouter(t, Options{Accounts: acc})
	c := accountCall(true)
	c.Sink = &askSink{action: "accept"} // accepted, but the callback never comes
	n := &sentWith{}
	start := time.Now()
	raw, err := accountsStage(s).Wrap(n.next)(t.Context(), c)
	if err != nil || !wire.IsToolError(raw) || !strings.Contains(string(raw), "link expired") || len(n.auth) != 0 {
		t.Fatalf("%s, %v, sent %d", raw, err, len(n.auth))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("waited %s past the consent's life", d)
	}
}
