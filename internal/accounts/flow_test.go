package accounts

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// A consent runs end to end: discovery from the probe's challenge, DCR,
// PKCE and resource on both requests, the callback, the wake-up, the
// vault; two users each get their own token, and a disconnected user
// none.
func TestConsentFlow(t *testing.T) {
	forStores(t, func(t *testing.T, store func() Store) {
		f := newFixture(t)
		f.challengeScope = "mcp:basic"
		e := newEnv(t, f, store(), nil)
		if _, err := e.token("alice"); !errors.Is(err, ErrNotConnected) {
			t.Fatalf("before consent Token = %v, want ErrNotConnected", err)
		}
		c, err := e.start("alice", StartRequest{Session: "sess-1"})
		if err != nil {
			t.Fatal(err)
		}
		if !validID(c.ID) || c.Server != "srv" || !c.Expires.After(time.Now()) {
			t.Errorf("consent = %+v", c)
		}
		u, _ := url.Parse(c.URL)
		q := u.Query()
		if q.Get("resource") != f.url() || q.Get("scope") != "mcp:basic" || q.Get("code_challenge_method") != "S256" ||
			q.Get("client_id") != "dyn-client-1" || q.Get("redirect_uri") != e.mux.URL+"/oauth/callback" {
			t.Errorf("authorization URL query = %v", q)
		}
		waited := e.waitAsync(c.ID)
		st, body := e.open(c.URL)
		if st != 200 || !strings.Contains(body, "Connected srv") || strings.Contains(body, markerCode) {
			t.Fatalf("callback page %d: %s", st, body)
		}
		if err := <-waited; err != nil {
			t.Fatalf("Wait = %v", err)
		}
		if done, err := e.m.Result(context.Background(), c.ID); !done || err != nil {
			t.Errorf("Result = %v, %v", done, err)
		}
		tr := f.tokenReqs[len(f.tokenReqs)-1]
		if tr.form.Get("resource") != f.url() || tr.basic != "dyn-client-1:"+markerSecret {
			t.Errorf("token request %v (basic %q)", tr.form, tr.basic)
		}
		alice, err := e.token("alice")
		if err != nil || !strings.HasPrefix(alice.Reveal(), markerAccess) {
			t.Fatalf("Token(alice) = %v, %v", alice.Reveal(), err)
		}

		e.connect("bob")
		bob, err := e.token("bob")
		if err != nil || bob == alice {
			t.Fatalf("Token(bob) = %v, %v (alice's is %v)", bob.Reveal(), err, alice.Reveal())
		}
		if len(f.registered) != 1 {
			t.Errorf("registered %d clients, want 1 (kept per issuer)", len(f.registered))
		}
		if any, err := e.m.AnyToken(context.Background(), "srv"); err != nil || (any != alice && any != bob) {
			t.Errorf("AnyToken = %v, %v", any.Reveal(), err)
		}
		st0 := e.m.Stats(context.Background())
		if len(st0) != 1 || st0[0].Connected != 2 || st0[0].ConsentsStarted != 2 || st0[0].ConsentsCompleted != 2 {
			t.Errorf("Stats = %+v", st0)
		}

		if ok, err := e.m.Disconnect(context.Background(), "alice", ""); !ok || err != nil {
			t.Fatalf("Disconnect = %v, %v", ok, err)
		}
		if _, err := e.token("alice"); !errors.Is(err, ErrNotConnected) {
			t.Errorf("after Disconnect Token(alice) = %v", err)
		}
		if ok, _ := e.m.Connected(context.Background(), "alice", "srv"); ok {
			t.Error("alice still connected")
		}
		if got, _ := e.token("bob"); got != bob {
			t.Error("Disconnect of alice changed bob's token")
		}
		if st := e.m.Stats(context.Background()); st[0].Connected != 1 {
			t.Errorf("Stats after a disconnect: %+v", st)
		}
	})
}

// A vault entry copied to another user (or server) does not open.
func TestVaultBinding(t *testing.T) {
	f := newFixture(t)
	e, s := boltEnv(t, f, nil)
	e.connect("alice")
	ctx := context.Background()
	rec, _ := s.getToken(ctx, e.m.userHash("alice"), "srv")
	if strings.Contains(string(rec), markerAccess) || strings.Contains(string(rec), markerRefresh) {
		t.Fatal("a token is stored in plain")
	}
	_ = s.putToken(ctx, e.m.userHash("mallory"), "srv", rec)
	if _, err := e.token("mallory"); !errors.Is(err, ErrNotConnected) {
		t.Errorf("a copied entry opened for mallory: %v", err)
	}
}

// A token about to expire is refreshed once for 20 concurrent callers;
// the rotated refresh token is kept; invalid_grant drops the entry.
func TestRefresh(t *testing.T) {
	forStores(t, func(t *testing.T, store func() Store) {
		f := newFixture(t)
		f.expiresIn = 600
		var clock offsetClock
		e := newEnv(t, f, store(), func(o *Options) { o.Now = clock.now })
		e.connect("alice")
		f.set(func(f *fixture) { f.expiresIn = 7200 })
		first, _ := e.token("alice")
		if f.refreshes != 0 {
			t.Fatal("a fresh token was refreshed")
		}
		clock.set(600 * time.Second) // within RefreshBefore of its expiry
		f.set(func(f *fixture) { f.refreshDelay = 200 * time.Millisecond })
		got := tokensAtOnce(t, "alice", 20, e)
		if f.refreshes != 1 {
			t.Errorf("%d refreshes for 20 concurrent calls, want 1", f.refreshes)
		}
		if got[0] == first.Reveal() || len(slices.Compact(slices.Clone(got))) != 1 {
			t.Errorf("tokens after the refresh: %v", got)
		}
		// The fixture accepts only the rotated refresh token.
		f.set(func(f *fixture) { f.refreshDelay = 0 })
		clock.set(7200 * time.Second)
		if v, err := e.token("alice"); err != nil || v.Reveal() == got[0] {
			t.Fatalf("refresh with the rotated token: %v", err)
		}
		f.set(func(f *fixture) { f.refreshMode = "invalid_grant" })
		clock.set(4 * time.Hour)
		if _, err := e.token("alice"); !errors.Is(err, ErrNotConnected) {
			t.Fatalf("invalid_grant: Token = %v, want ErrNotConnected", err)
		}
		if ok, _ := e.m.Connected(context.Background(), "alice", "srv"); ok {
			t.Error("the entry stayed after invalid_grant")
		}
		if s := e.m.Stats(context.Background())[0]; s.Refreshes != 3 || s.Failures["refresh"] != 1 || s.Connected != 0 {
			t.Errorf("Stats = %+v", s)
		}
	})
}

// A 401 refreshes once (Again); a 401 to the refreshed token drops the
// entry; a 401 to an older token only retries.
func TestRejected401(t *testing.T) {
	e, _ := boltEnv(t, newFixture(t), nil)
	e.connect("alice")
	ctx := context.Background()
	old, _ := e.token("alice")
	r, err := e.m.Rejected(ctx, "alice", "srv", old, 401, nil)
	if err != nil || !r.Again {
		t.Fatalf("first 401: %+v, %v", r, err)
	}
	cur, _ := e.token("alice")
	if cur == old {
		t.Fatal("the 401 did not refresh")
	}
	if r, err := e.m.Rejected(ctx, "alice", "srv", old, 401, nil); err != nil || !r.Again {
		t.Errorf("401 to a replaced token: %+v, %v", r, err)
	}
	if _, err := e.m.Rejected(ctx, "alice", "srv", cur, 401, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("401 to the refreshed token: %v, want ErrNotConnected", e.keep(err))
	}
	if n := e.f.refreshes; n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}

// A 403 insufficient_scope steps up with the union of the scopes; when
// the scopes were already asked for, it gives up (scope-retry-limit).
func TestStepUp(t *testing.T) {
	f := newFixture(t)
	f.challengeScope = "mcp:basic"
	e, _ := boltEnv(t, f, nil)
	e.connect("alice")
	ctx := context.Background()
	tok, _ := e.token("alice")
	www := []string{`Bearer error="insufficient_scope", scope="mcp:basic mcp:write"`}
	r, err := e.m.Rejected(ctx, "alice", "srv", tok, 403, www)
	if err != nil || !slices.Equal(r.StepUp, []string{"mcp:basic", "mcp:write"}) {
		t.Fatalf("403: %+v, %v", r, err)
	}
	c, err := e.start("alice", StartRequest{StepUp: r.StepUp, WWWAuthenticate: www})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(c.URL)
	if got := u.Query().Get("scope"); got != "mcp:basic mcp:write" {
		t.Errorf("step-up scope = %q", got)
	}
	e.open(c.URL)
	if err := e.m.Wait(ctx, c.ID); err != nil {
		t.Fatal(err)
	}
	tok, _ = e.token("alice")
	_, err = e.m.Rejected(ctx, "alice", "srv", tok, 403, www)
	if err == nil || !strings.Contains(e.keep(err).Error(), "refuses even with scopes") {
		t.Errorf("second 403 = %v", err)
	}
	if _, err := e.m.Rejected(ctx, "alice", "srv", tok, 403, []string{`Bearer error="invalid_request"`}); e.keep(err) == nil {
		t.Error("a 403 without insufficient_scope asked for a step-up")
	}
	if n := len(f.authorizes); n > 3 {
		t.Errorf("%d authorizations", n)
	}
}

// A 401 to a token AnyToken gave (the mux's own discovery) refreshes the
// user's token once and drops the refreshed one when it is refused too;
// a token no user holds is ignored.
func TestAnyRejected(t *testing.T) {
	f := newFixture(t)
	s, _ := OpenBoltStore(BoltOptions{Dir: t.TempDir()})
	defer s.Close()
	e := newEnv(t, f, s, nil)
	e.connect("alice")
	ctx := context.Background()
	old, err := e.m.AnyToken(ctx, "srv")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.keep(e.m.AnyRejected(ctx, "srv", "not-a-token-anyone-holds")); err != nil || f.refreshes != 0 {
		t.Fatalf("unknown token: %v, %d refreshes", err, f.refreshes)
	}
	if err := e.keep(e.m.AnyRejected(ctx, "srv", old)); err != nil {
		t.Fatalf("first 401: %v", err)
	}
	cur, err := e.m.AnyToken(ctx, "srv")
	if err != nil || cur == old || f.refreshes != 1 {
		t.Fatalf("the 401 did not refresh: %v, %d refreshes", err, f.refreshes)
	}
	if err := e.keep(e.m.AnyRejected(ctx, "srv", cur)); err != nil {
		t.Fatalf("second 401: %v", err)
	}
	if _, err := e.token("alice"); !errors.Is(err, ErrNotConnected) {
		t.Errorf("after a 401 to the refreshed token: %v, want ErrNotConnected", err)
	}
	if err := e.m.AnyRejected(ctx, "nope", cur); !errors.Is(err, ErrUnknownServer) {
		t.Errorf("unknown server: %v", err)
	}
}
