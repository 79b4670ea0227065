package inbound_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/mcp-mux/mcp-mux/internal/inbound"
)

// Issue 32: what a caller chooses — a token's kid, its claims, a header —
// is bounded and checked before it is kept or used.

const (
	testIssuer   = "https://idp.example"
	testAudience = "mcp-mux"
)

// jwtAuth is a jwt-mode Authenticator against is; edit changes the options.
func jwtAuth(t *testing.T, is *issuer, edit func(*inbound.Options)) *inbound.Authenticator {
	t.Helper()
	o := inbound.Options{Mode: "jwt", JWKSURL: is.ts.URL, Issuer: testIssuer, Audience: testAudience}
	if edit != nil {
		edit(&o)
	}
	a, err := inbound.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// validClaims are claims every jwtAuth accepts.
func validClaims() jwt.Claims {
	return jwt.Claims{Issuer: testIssuer, Audience: jwt.Audience{testAudience}, Subject: "u1", Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
}

// identify authenticates a request carrying tok, with ctx.
func identify(ctx context.Context, a *inbound.Authenticator, tok string) (inbound.Identity, error) {
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:8931/mcp", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return a.Identify(r)
}

// entered waits for a JWKS request to reach is while it is held.
func entered(t *testing.T, is *issuer, what string) {
	t.Helper()
	select {
	case <-is.entered:
	case <-time.After(time.Minute):
		t.Fatalf("%s caused no JWKS request", what)
	}
}

// fakeClock is a clock the test moves; it counts its reads (every login
// reads it once when it looks up its key).
type fakeClock struct{ ns, reads atomic.Int64 }

func newClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Now().UnixNano())
	return c
}

func (c *fakeClock) now() time.Time {
	c.reads.Add(1)
	return time.Unix(0, c.ns.Load())
}

func (c *fakeClock) add(d time.Duration)    { c.ns.Add(int64(d)) }
func (c *fakeClock) use(o *inbound.Options) { o.Now = c.now }

// waitFor polls cond until it holds; after a minute the test fails with what.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestJWKSRefetchOutlivesHangups (attack 8): a client that sends a token
// naming an unknown kid and hangs up while the refetch it caused is at the
// issuer cancels nothing: the refetch completes, so after the issuer
// rotated its key every real login works.
func TestJWKSRefetchOutlivesHangups(t *testing.T) {
	is := newIssuer(t)
	clock := newClock()
	a := jwtAuth(t, is, clock.use)
	bg := context.Background()
	if _, err := identify(bg, a, is.token(t, "k1", validClaims(), nil)); err != nil {
		t.Fatalf("login before the rotation: %v", err)
	}
	clock.add(time.Minute) // the issuer rotates its key a while later
	is.rotate(t, "k2")
	release := is.hold(t)
	ctx, hangUp := context.WithCancel(bg)
	attacker := make(chan error, 1)
	go func() {
		_, err := identify(ctx, a, is.tokenAs(t, "k2", "attacker-kid", validClaims(), nil))
		attacker <- err
	}()
	entered(t, is, "the attacker's token") // the refetch it caused is at the issuer
	hangUp()
	if err := <-attacker; err == nil {
		t.Fatal("a token naming an unknown kid was accepted")
	}
	release()
	ok := 0
	for range 60 {
		if _, err := identify(bg, a, is.token(t, "k2", validClaims(), nil)); err == nil {
			ok++
		}
	}
	if ok != 60 {
		t.Fatalf("%d of 60 logins with the rotated key worked after a client hung up on the JWKS refetch, want 60", ok)
	}
}

// TestJWKSWaitIsTheCallers (attack 8): while a refetch hangs at the
// issuer, a login with a known key is served at once, and a login waiting
// for the refetch waits only as long as its own context; the refetch goes
// on.
func TestJWKSWaitIsTheCallers(t *testing.T) {
	is := newIssuer(t)
	clock := newClock()
	a := jwtAuth(t, is, clock.use)
	bg := context.Background()
	if _, err := identify(bg, a, is.token(t, "k1", validClaims(), nil)); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	is.rotate(t, "k2")
	release := is.hold(t)
	ctx, leave := context.WithCancel(bg)
	waiting := make(chan error, 1)
	go func() {
		_, err := identify(ctx, a, is.token(t, "k2", validClaims(), nil))
		waiting <- err
	}()
	entered(t, is, "a token with the rotated key")
	// k1 is still in the cached set: no wait for the refetch.
	if _, err := identify(bg, a, is.tokenAs(t, "k1", "k1", validClaims(), nil)); err != nil {
		t.Fatalf("a login with a cached key: %v", err)
	}
	select {
	case err := <-waiting:
		t.Fatalf("a login with a cached key returned only after the refetch it did not need (which ended: %v)", err)
	default:
	}
	if is.inflight.Load() != 1 {
		t.Fatalf("a login with a cached key returned only after the refetch ended (%d JWKS requests in flight, want 1)", is.inflight.Load())
	}
	leave()
	if err := <-waiting; !errors.Is(err, context.Canceled) || !errors.Is(err, inbound.ErrUnauthenticated) {
		t.Fatalf("a login whose client left while it waited: %v, want unauthenticated and context.Canceled", err)
	}
	if is.inflight.Load() != 1 {
		t.Fatal("the refetch ended with the client that waited for it")
	}
	release()
	waitFor(t, "the refetch", func() bool { return is.inflight.Load() == 0 })
	if _, err := identify(bg, a, is.token(t, "k2", validClaims(), nil)); err != nil {
		t.Fatalf("the rotated key after the refetch: %v", err)
	}
	if n := is.hits.Load(); n != 2 {
		t.Errorf("%d JWKS requests, want 2 (the first fetch and one refetch)", n)
	}
}

// TestJWKSRefetchesBounded: unknown kids cause at most one refetch in
// flight and one queued, however many arrive at once, and one kid causes
// at most one refetch per 30 s.
func TestJWKSRefetchesBounded(t *testing.T) {
	is := newIssuer(t)
	clock := newClock()
	a := jwtAuth(t, is, clock.use)
	bg := context.Background()
	if _, err := identify(bg, a, is.token(t, "k1", validClaims(), nil)); err != nil {
		t.Fatal(err)
	}
	clock.add(time.Minute)
	release := is.hold(t)
	const n = 50
	toks := make([]string, n)
	for i := range toks {
		toks[i] = is.tokenAs(t, "k1", "unknown-"+strings.Repeat("x", i), validClaims(), nil)
	}
	clock.reads.Store(0)
	done := make(chan error, n)
	for _, tok := range toks {
		go func() {
			_, err := identify(bg, a, tok)
			done <- err
		}()
	}
	entered(t, is, "50 tokens with unknown kids")
	waitFor(t, "every login to look up its key", func() bool { return clock.reads.Load() >= n })
	if got := is.hits.Load() - 1; got != 1 {
		t.Fatalf("%d JWKS requests while the first refetch hangs, want 1", got)
	}
	release()
	for range n {
		if err := <-done; err == nil {
			t.Fatal("a token naming an unknown kid was accepted")
		}
	}
	if got := is.hits.Load() - 1; got != 2 {
		t.Errorf("%d concurrent logins with unknown kids made %d JWKS requests, want 2 (the one in flight and one after it)", n, got)
	}
	before := is.hits.Load()
	for range 5 {
		if _, err := identify(bg, a, is.tokenAs(t, "k1", "unknown-", validClaims(), nil)); err == nil {
			t.Fatal("accepted")
		}
	}
	if got := is.hits.Load() - before; got != 0 {
		t.Errorf("a kid that caused a refetch caused %d more within 30 s, want 0", got)
	}
	clock.add(31 * time.Second)
	for range 5 {
		_, _ = identify(bg, a, is.tokenAs(t, "k1", "unknown-", validClaims(), nil))
	}
	if got := is.hits.Load() - before; got != 1 {
		t.Errorf("the same kid 31 s later caused %d refetches, want 1", got)
	}
}

// TestJWKSFollowsNoRedirect (attack 12): a JWKS URL that answers with a
// redirect is an error naming the endpoint; the redirect's target, which
// serves a key set of its own, is never asked, so its keys sign nothing.
func TestJWKSFollowsNoRedirect(t *testing.T) {
	evil := newIssuer(t)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", evil.ts.URL+"/jwks")
		w.WriteHeader(http.StatusTemporaryRedirect)
		_, _ = w.Write([]byte("REDIRECT-BODY-sekret"))
	}))
	t.Cleanup(redirect.Close)
	a, err := inbound.New(inbound.Options{Mode: "jwt", JWKSURL: redirect.URL + "/jwks", Issuer: testIssuer, Audience: testAudience})
	if err != nil {
		t.Fatal(err)
	}
	before := evil.hits.Load()
	_, err = identify(context.Background(), a, evil.token(t, "k1", validClaims(), nil))
	if err == nil {
		t.Fatal("a token signed with the redirect target's key was accepted")
	}
	if n := evil.hits.Load() - before; n != 0 {
		t.Errorf("the redirect target got %d requests, want 0", n)
	}
	if msg := err.Error(); !strings.Contains(msg, "redirect") || !strings.Contains(msg, redirect.URL) || strings.Contains(msg, "REDIRECT-BODY") || strings.Contains(msg, evil.ts.URL) {
		t.Errorf("error %q: want it to name the JWKS endpoint and the redirect, not the body or the target", msg)
	}
}

// TestUserBounded (attack 4): a user id past bounds.User or with control
// characters, from the trusted header or the JWT user claim, and a user
// claim that is not a string, are authentication failures naming the
// header or claim and the bound, never the value.
func TestUserBounded(t *testing.T) {
	long := "u" + strings.Repeat("x", 256) // 257 bytes
	hdr, err := inbound.New(inbound.Options{Mode: "trusted_header", UserHeader: "X-Remote-User"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{long, "ali\x01ce", "bob\u0085"} {
		_, err := hdr.Authenticate(request(map[string]string{"X-Remote-User": v}))
		if !errors.Is(err, inbound.ErrUnauthenticated) || !strings.Contains(err.Error(), "X-Remote-User") || strings.Contains(err.Error(), "xxxx") {
			t.Errorf("trusted header user of %d bytes: %v; want unauthenticated naming X-Remote-User, without the value", len(v), err)
		}
	}
	if err := mustErr(hdr.Authenticate(request(map[string]string{"X-Remote-User": long}))); !strings.Contains(err.Error(), "256") {
		t.Error("the error of a long user does not name the bound")
	}
	twice := request(nil)
	twice.Header.Add("X-Remote-User", "alice")
	twice.Header.Add("X-Remote-User", "admin")
	if u, err := hdr.Authenticate(twice); !errors.Is(err, inbound.ErrUnauthenticated) || !strings.Contains(err.Error(), "X-Remote-User") {
		t.Errorf("the user header sent twice: %q %v, want unauthenticated naming it", u, err)
	}
	if u, err := hdr.Authenticate(request(map[string]string{"X-Remote-User": strings.Repeat("é", 128)})); err != nil || len(u) != 256 {
		t.Errorf("a 256-byte user: %q %v", u, err)
	}

	is := newIssuer(t)
	a := jwtAuth(t, is, func(o *inbound.Options) { o.UserClaim = "email" })
	for name, v := range map[string]any{"long": long, "control": "a\x00b", "number": 7, "array": []string{"alice"}, "object": map[string]any{"a": "b"},
		"null": nil, "empty": ""} {
		_, err := identify(context.Background(), a, is.token(t, "k1", validClaims(), map[string]any{"email": v}))
		if !errors.Is(err, inbound.ErrUnauthenticated) || !strings.Contains(err.Error(), `"email"`) || strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s user claim: %v; want unauthenticated naming the claim, without the value", name, err)
		}
	}
	if id, err := identify(context.Background(), a, is.token(t, "k1", validClaims(), map[string]any{"email": strings.Repeat("é", 128)})); err != nil || len(id.User) != 256 {
		t.Errorf("a 256-byte user claim: %q %v", id.User, err)
	}
}

// mustErr returns the error of a (value, error) pair.
func mustErr(_ string, err error) error {
	if err == nil {
		return errors.New("no error")
	}
	return err
}
