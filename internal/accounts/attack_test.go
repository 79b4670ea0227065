package accounts

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// waitErr waits for a consent with a timeout.
func (e *env) waitErr(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return e.keep(e.m.Wait(ctx, id))
}

// Forged, replayed, expired and cross-user states are refused with a 400
// page naming the problem, and nothing is stored.
func TestCallbackState(t *testing.T) {
	forStores(t, func(t *testing.T, store func() Store) {
		f := newFixture(t)
		e := newEnv(t, f, store(), func(o *Options) { o.StateTTL = time.Second })
		cb := e.mux.URL + "/oauth/callback?"
		for name, q := range map[string]string{
			"forged":   "state=mo1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA&code=x",
			"no state": "code=x",
			"repeated": "state=a&state=b&code=x",
		} {
			if st, body := get(t, cb+q); st != 400 || !strings.Contains(body, "invalid") {
				t.Errorf("%s: %d %s", name, st, body)
			}
		}

		// Replayed: the first use connects, the second is refused.
		c, _ := e.start("alice", StartRequest{})
		loc := e.redirect(c.URL)
		cbURL := e.mux.URL + "/oauth/callback?" + loc.RawQuery
		if st, _ := get(t, cbURL); st != 200 {
			t.Fatalf("first callback: %d", st)
		}
		if st, body := get(t, cbURL); st != 400 || !strings.Contains(body, "already used or has expired") {
			t.Errorf("replay: %d %s", st, body)
		}

		// Cross-user: bob's code with alice's state fails at the token
		// endpoint (PKCE), and alice is not connected.
		ca, _ := e.start("carol", StartRequest{})
		cb2, _ := e.start("bob", StartRequest{})
		la, lb := e.redirect(ca.URL), e.redirect(cb2.URL)
		q := la.Query()
		q.Set("code", lb.Query().Get("code"))
		if st, body := get(t, e.mux.URL+"/oauth/callback?"+q.Encode()); st != 400 || !strings.Contains(body, "refused") {
			t.Errorf("cross-user code: %d %s", st, body)
		}
		if ce := consentErr(t, e.waitErr(ca.ID)); ce.Reason != "exchange" {
			t.Errorf("cross-user code: %+v", ce)
		}
		if ok, _ := e.m.Connected(context.Background(), "carol", "srv"); ok {
			t.Error("carol connected with bob's code")
		}

		// Expired: the state and the pending record outlive StateTTL no more.
		c3, _ := e.start("dave", StartRequest{})
		l3 := e.redirect(c3.URL)
		time.Sleep(2100 * time.Millisecond)
		if st, body := get(t, e.mux.URL+"/oauth/callback?"+l3.RawQuery); st != 400 {
			t.Errorf("expired: %d %s", st, body)
		}
		if ok, _ := e.m.Connected(context.Background(), "dave", "srv"); ok {
			t.Error("an expired consent connected")
		}
	})
}

// An expired consent's Wait says so (pending record and result expire).
func TestWaitExpired(t *testing.T) {
	f := newFixture(t)
	var clock offsetClock
	e, _ := boltEnv(t, f, func(o *Options) { o.Now = clock.now })
	c, _ := e.start("alice", StartRequest{})
	if done, err := e.m.Result(context.Background(), c.ID); done || err != nil {
		t.Fatalf("a fresh consent: %v %v", done, err)
	}
	clock.set(seal10m + resultGrace + time.Second)
	if ce := consentErr(t, e.waitErr(c.ID)); ce.Reason != "expired" {
		t.Errorf("%+v", ce)
	}
	if done, err := e.m.Result(context.Background(), "NOTAVALIDID"); !done || err == nil {
		t.Error("an unknown id is pending")
	}
	if st := e.m.Stats(context.Background())[0]; st.Failures["expired"] != 1 || st.ConsentsFailed != 1 {
		t.Errorf("Stats = %+v", st)
	}
	// An abandoned consent nobody waits for is forgotten when a later one
	// starts (uncounted: another replica may have completed it); a
	// waited-for one is not counted again.
	if _, err := e.start("bob", StartRequest{}); err != nil {
		t.Fatal(err)
	}
	clock.set(2 * (seal10m + resultGrace + time.Second))
	if _, err := e.start("carol", StartRequest{}); err != nil {
		t.Fatal(err)
	}
	e.m.mu.Lock()
	n := len(e.m.local)
	e.m.mu.Unlock()
	if st := e.m.Stats(context.Background())[0]; st.Failures["expired"] != 1 || n != 1 {
		t.Errorf("Stats = %+v, %d remembered", st, n)
	}
}

const seal10m = 10 * time.Minute

// error=access_denied fails the consent and wakes its waiter.
func TestDenied(t *testing.T) {
	f := newFixture(t)
	f.deny = true
	e, _ := boltEnv(t, f, nil)
	c, _ := e.start("alice", StartRequest{})
	st, body := e.open(c.URL)
	if st != 400 || !strings.Contains(body, "access was denied") {
		t.Errorf("page %d %s", st, body)
	}
	if ce := consentErr(t, e.waitErr(c.ID)); ce.Reason != "denied" {
		t.Errorf("%+v", ce)
	}
	if s := e.m.Stats(context.Background())[0]; s.Failures["denied"] != 1 {
		t.Errorf("Stats %+v", s)
	}
}

// RFC 9207: the six cases of the conformance iss scenarios.
func TestIss(t *testing.T) {
	for _, tc := range []struct {
		name       string
		advertised bool
		mode       string
		ok         bool
	}{
		{"supported", true, "right", true},
		{"not-advertised", false, "none", true},
		{"supported-missing", true, "none", false},
		{"wrong-issuer", true, "wrong", false},
		{"unexpected", false, "wrong", false},
		{"normalized", true, "normalized", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.issSupported, f.issMode = tc.advertised, tc.mode
			e, _ := boltEnv(t, f, nil)
			c, err := e.start("alice", StartRequest{})
			if err != nil {
				t.Fatal(err)
			}
			e.open(c.URL)
			err = e.waitErr(c.ID)
			if tc.ok != (err == nil) {
				t.Fatalf("Wait = %v", err)
			}
			if !tc.ok {
				if ce := consentErr(t, err); ce.Reason != "iss" {
					t.Errorf("%+v", ce)
				}
				if len(f.tokenReqs) != 0 {
					t.Error("the code was exchanged")
				}
			}
		})
	}
}

// A caller starting 1,000 consents gets 5; the rest are refused with a
// clear error, before any request, storing nothing; the fleet-wide bound
// holds too.
func TestFlood(t *testing.T) {
	forStores(t, func(t *testing.T, store func() Store) {
		f := newFixture(t)
		e := newEnv(t, f, store(), func(o *Options) { o.MaxPending = 8 })
		var refused int
		var before int
		for i := range 1000 {
			if i == 5 {
				before = f.count()
			}
			_, err := e.start("mallory", StartRequest{})
			switch {
			case i < 5 && err != nil:
				t.Fatalf("start %d: %v", i, err)
			case i >= 5 && !errors.Is(err, ErrTooManyConsents):
				t.Fatalf("start %d: %v", i, err)
			case i >= 5:
				refused++
			}
		}
		if f.count() != before {
			t.Errorf("refused starts made %d requests", f.count()-before)
		}
		if refused != 995 {
			t.Errorf("refused %d", refused)
		}
		_, err := e.start("mallory", StartRequest{})
		if !strings.Contains(err.Error(), "too many consents pending: this user already has 5") {
			t.Errorf("error text: %v", err)
		}
		for i := range 3 {
			if _, err := e.start("alice", StartRequest{}); err != nil {
				t.Fatalf("alice %d: %v", i, err)
			}
		}
		if _, err := e.start("bob", StartRequest{}); !errors.Is(err, ErrTooManyConsents) || !strings.Contains(err.Error(), "the mux already has 8") {
			t.Errorf("past the fleet bound: %v", err)
		}
		if s := e.m.Stats(context.Background())[0]; s.ConsentsStarted != 8 || s.Failures["too_many"] != 997 {
			t.Errorf("Stats %+v", s)
		}
	})
}

// A token endpoint that redirects, answers more than 1 MiB or too slowly
// fails the consent; nothing is stored.
func TestHostileTokenEndpoint(t *testing.T) {
	for _, mode := range []string{"redirect", "huge", "slow"} {
		t.Run(mode, func(t *testing.T) {
			f := newFixture(t)
			f.tokenMode = mode
			e, _ := boltEnv(t, f, nil)
			c, _ := e.start("alice", StartRequest{})
			begin := time.Now()
			st, body := e.open(c.URL)
			if st != 400 || time.Since(begin) > 3*time.Second {
				t.Errorf("page %d after %v: %s", st, time.Since(begin), body)
			}
			ce := consentErr(t, e.waitErr(c.ID))
			if ce.Reason != "exchange" {
				t.Errorf("%+v", ce)
			}
			t.Log(ce.Message)
			if ok, _ := e.m.Connected(context.Background(), "alice", "srv"); ok {
				t.Error("stored")
			}
		})
	}
}

// Discovery failures stop a consent before any authorization request: a
// resource metadata document for another resource, and authorization
// server metadata naming another issuer.
func TestDiscoveryRefusals(t *testing.T) {
	for name, set := range map[string]func(*fixture){
		"resource-mismatch":        func(f *fixture) { f.prmResource = "https://evil.example.com/mcp" },
		"metadata-issuer-mismatch": func(f *fixture) { f.issuerOverride = "https://attacker.example.com" },
		"no-registration":          func(f *fixture) { f.noRegistration = true },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			set(f)
			e, _ := boltEnv(t, f, nil)
			_, err := e.start("alice", StartRequest{})
			if err == nil {
				t.Fatal("Start succeeded")
			}
			t.Log(err)
			if len(f.registered) != 0 || len(f.authorizes) != 0 {
				t.Error("registered or authorized")
			}
			// The reservation was released: five more starts are refused
			// for the same reason, not for the bound.
			for range 5 {
				if _, err := e.start("alice", StartRequest{}); errors.Is(err, ErrTooManyConsents) {
					t.Fatal("a failed start kept its reservation")
				}
			}
		})
	}
}

// The client: pre-registration (Basic), CIMD (public), DCR with the
// method the AS lists (basic > post > none), never auto-detected.
func TestClientAuth(t *testing.T) {
	for _, tc := range []struct {
		name     string
		methods  []string
		cimd     bool
		sc       func(*ServerConfig)
		basic    string
		secret   string // client_secret in the body
		clientID string
	}{
		{"dcr-basic", []string{"client_secret_basic", "client_secret_post"}, false, nil, "dyn-client-1:" + markerSecret, "", ""},
		{"dcr-post", []string{"client_secret_post"}, false, nil, "", markerSecret, "dyn-client-1"},
		{"dcr-none", []string{"none"}, false, nil, "", "", "dyn-client-1"},
		{"pre-registration", []string{"client_secret_basic"}, false, func(s *ServerConfig) {
			s.ClientID, s.ClientSecret = "pre-registered-client", markerSecret
		}, "pre-registered-client:" + markerSecret, "", ""},
		{"cimd", []string{"none"}, true, func(s *ServerConfig) {
			s.ClientMetadataURL = "https://conformance-test.local/client-metadata.json"
		}, "", "", "https://conformance-test.local/client-metadata.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.authMethods, f.cimd = tc.methods, tc.cimd
			var scs []func(*ServerConfig)
			if tc.sc != nil {
				scs = append(scs, tc.sc)
			}
			e, _ := boltEnv(t, f, nil, scs...)
			e.connect("alice")
			r := f.tokenReqs[0]
			if r.basic != tc.basic || r.form.Get("client_secret") != tc.secret || r.form.Get("client_id") != tc.clientID {
				t.Errorf("token request: basic %q, form %v", r.basic, r.form)
			}
			if (tc.sc != nil) != (len(f.registered) == 0) {
				t.Errorf("registrations: %v", f.registered)
			}
			if len(f.registered) == 1 {
				reg := f.registered[0]
				if reg["application_type"] != "web" || fmt.Sprint(reg["grant_types"]) != "[authorization_code refresh_token]" {
					t.Errorf("registration metadata %v", reg)
				}
			}
		})
	}
}

// Scopes: the challenge's, else the resource metadata's, else none; with
// offline_access only when the AS lists it.
func TestScopes(t *testing.T) {
	for _, tc := range []struct {
		name             string
		challenge        string
		prm, as          []string
		cfg, want        string
		wantScopePresent bool
	}{
		{"from-challenge", "mcp:basic", []string{"mcp:read"}, nil, "", "mcp:basic", true},
		{"from-scopes-supported", "", []string{"mcp:basic", "mcp:read", "mcp:write"}, nil, "", "mcp:basic mcp:read mcp:write", true},
		{"from-config", "", nil, nil, "repo user", "repo user", true},
		{"omitted", "", nil, nil, "", "", false},
		{"offline-access", "", []string{"mcp:basic"}, []string{"mcp:basic", "offline_access"}, "", "mcp:basic offline_access", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.challengeScope, f.prmScopes, f.asScopes = tc.challenge, tc.prm, tc.as
			e, _ := boltEnv(t, f, nil, func(s *ServerConfig) { s.Scope = tc.cfg })
			c, err := e.start("alice", StartRequest{})
			if err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(c.URL)
			if got, ok := u.Query()["scope"]; ok != tc.wantScopePresent || u.Query().Get("scope") != tc.want {
				t.Errorf("scope = %q (present %v)", got, ok)
			}
		})
	}
}

// A server that moved to another issuer registers again there, never
// reusing the first issuer's client.
func TestIssuerMigration(t *testing.T) {
	f := newFixture(t)
	e, _ := boltEnv(t, f, nil)
	e.connect("alice")
	f.set(func(f *fixture) { f.issuerPath = "/as2" })
	c, err := e.start("alice", StartRequest{})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(c.URL)
	if len(f.registered) != 2 || u.Query().Get("client_id") != "dyn-client-2" {
		t.Errorf("registrations %d, client %q", len(f.registered), u.Query().Get("client_id"))
	}
}

// A reload that removes a server fails its pending consents.
func TestConfigureRemoves(t *testing.T) {
	f := newFixture(t)
	e, _ := boltEnv(t, f, nil)
	c, _ := e.start("alice", StartRequest{})
	e.m.Configure(nil)
	if ce := consentErr(t, e.waitErr(c.ID)); ce.Reason != "removed" {
		t.Errorf("%+v", ce)
	}
	if _, err := e.m.Token(context.Background(), "alice", "srv"); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("Token of a removed server: %v", err)
	}
}

// The client metadata document is served for an https public URL only.
func TestClientMetadata(t *testing.T) {
	f := newFixture(t)
	e, _ := boltEnv(t, f, nil)
	if st, _ := get(t, e.mux.URL+"/oauth/client-metadata.json"); st != http.StatusNotFound {
		t.Errorf("http public URL: %d", st)
	}
}

// consentErr is the ConsentError of err, or fails.
func consentErr(t *testing.T, err error) *ConsentError {
	t.Helper()
	var ce *ConsentError
	if !errors.As(err, &ce) {
		t.Fatalf("want a ConsentError, got %v", err)
	}
	return ce
}

// redirect asks the AS for the consent URL and returns its redirect (the
// callback URL) without following it.
func (e *env) redirect(u string) *url.URL {
	e.t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(u)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		e.t.Fatalf("the AS did not redirect: %v", err)
	}
	return loc
}

// Only GET completes a consent: a HEAD (a link prefetcher) leaves it.
func TestCallbackHead(t *testing.T) {
	e, _ := boltEnv(t, newFixture(t), nil)
	c, _ := e.start("alice", StartRequest{})
	loc := e.redirect(c.URL)
	cb := e.mux.URL + "/oauth/callback?" + loc.RawQuery
	if resp, err := http.Head(cb); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("HEAD: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if st, _ := get(t, cb); st != 200 {
		t.Errorf("GET after HEAD: %d", st)
	}
	if _, err := e.m.Rejected(context.Background(), "alice", "srv", "x", 500, nil); e.keep(err) == nil {
		t.Error("Rejected took a 500")
	}
}
