package inbound_test

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"go.uber.org/goleak"

	"github.com/mcp-mux/mcp-mux/internal/inbound"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func request(h map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8931/mcp", nil)
	for k, v := range h {
		r.Header.Set(k, v)
	}
	return r
}

func TestNoneIsDefaultUser(t *testing.T) {
	a, err := inbound.New(inbound.Options{Mode: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := a.Authenticate(request(nil)); err != nil || u != "default" {
		t.Fatalf("user %q err %v", u, err)
	}
}

func TestTrustedHeader(t *testing.T) {
	a, err := inbound.New(inbound.Options{Mode: "trusted_header", UserHeader: "X-Mux-User"})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := a.Authenticate(request(map[string]string{"X-Mux-User": "alice"})); err != nil || u != "alice" {
		t.Fatalf("user %q err %v", u, err)
	}
	if _, err := a.Authenticate(request(nil)); !errors.Is(err, inbound.ErrUnauthenticated) {
		t.Fatalf("missing header: %v", err)
	}
}

func TestAPIKeys(t *testing.T) {
	const aliceKey, bobKey = "key-alice-7f3a9c1e2b", "key-bob-5d8e2f4a6c"
	a, err := inbound.New(inbound.Options{Mode: "api_keys", Keys: map[string]string{"alice": aliceKey, "bob": bobKey}})
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{aliceKey: "alice", bobKey: "bob"} {
		if u, err := a.Authenticate(request(map[string]string{"Authorization": "Bearer " + key})); err != nil || u != want {
			t.Errorf("key for %s: user %q err %v", want, u, err)
		}
	}
	for _, h := range []string{"", "Bearer ", "Bearer wrong-key", "Basic " + aliceKey, aliceKey, "Bearer " + aliceKey + "x"} {
		_, err := a.Authenticate(request(map[string]string{"Authorization": h}))
		if !errors.Is(err, inbound.ErrUnauthenticated) {
			t.Errorf("Authorization %q accepted: %v", h, err)
			continue
		}
		if strings.Contains(err.Error(), "key-") {
			t.Errorf("error echoes a key: %v", err)
		}
	}
	if _, err := inbound.New(inbound.Options{Mode: "api_keys", Keys: map[string]string{"carol": ""}}); err == nil {
		t.Error("an empty key was accepted")
	}
}

// issuer is a real JWKS endpoint with a rotating RSA key. While held
// (hold), its requests wait until released or until their client hangs up.
type issuer struct {
	ts       *httptest.Server
	keys     atomic.Pointer[jose.JSONWebKeySet]
	hits     atomic.Int32
	inflight atomic.Int32
	gate     atomic.Pointer[chan struct{}]
	entered  chan struct{} // one value per held request
	signs    map[string]*rsa.PrivateKey
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{signs: map[string]*rsa.PrivateKey{}, entered: make(chan struct{}, 1024)}
	is.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.hits.Add(1)
		is.inflight.Add(1)
		defer is.inflight.Add(-1)
		if g := is.gate.Load(); g != nil {
			is.entered <- struct{}{}
			select {
			case <-*g:
			case <-r.Context().Done():
				return
			}
		}
		_ = json.NewEncoder(w).Encode(is.keys.Load())
	}))
	t.Cleanup(is.ts.Close)
	is.rotate(t, "k1")
	return is
}

// hold makes JWKS requests wait; the returned func releases them (and
// every later one).
func (is *issuer) hold(t *testing.T) func() {
	g := make(chan struct{})
	is.gate.Store(&g)
	var once sync.Once
	release := func() { once.Do(func() { close(g) }) }
	t.Cleanup(release)
	return release
}

// rotate publishes a new key kid (only that key).
func (is *issuer) rotate(t *testing.T, kid string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.signs[kid] = k
	is.keys.Store(&jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"}}})
}

func (is *issuer) token(t *testing.T, kid string, c jwt.Claims, extra map[string]any) string {
	t.Helper()
	return is.tokenAs(t, kid, kid, c, extra)
}

// tokenAs signs with the key signKid and names headerKid in the header.
func (is *issuer) tokenAs(t *testing.T, signKid, headerKid string, c jwt.Claims, extra map[string]any) string {
	t.Helper()
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: is.signs[signKid]}, (&jose.SignerOptions{}).WithHeader("kid", headerKid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(c).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestJWT(t *testing.T) {
	is := newIssuer(t)
	now := time.Now()
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	a, err := inbound.New(inbound.Options{Mode: "jwt", JWKSURL: is.ts.URL, Issuer: "https://idp.example", Audience: "mcp-mux", UserClaim: "email",
		Now: func() time.Time { return time.Unix(0, clock.Load()) }})
	if err != nil {
		t.Fatal(err)
	}
	good := jwt.Claims{Issuer: "https://idp.example", Audience: jwt.Audience{"mcp-mux"}, Subject: "u1", Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	auth := func(tok string) (string, error) {
		return a.Authenticate(request(map[string]string{"Authorization": "Bearer " + tok}))
	}
	if u, err := auth(is.token(t, "k1", good, map[string]any{"email": "alice@example.com"})); err != nil || u != "alice@example.com" {
		t.Fatalf("user %q err %v", u, err)
	}
	bad := map[string]jwt.Claims{
		"wrong issuer":   {Issuer: "https://evil", Audience: good.Audience, Expiry: good.Expiry},
		"wrong audience": {Issuer: good.Issuer, Audience: jwt.Audience{"other"}, Expiry: good.Expiry},
		"expired":        {Issuer: good.Issuer, Audience: good.Audience, Expiry: jwt.NewNumericDate(now.Add(-time.Hour))},
		"no expiry":      {Issuer: good.Issuer, Audience: good.Audience},
	}
	for name, c := range bad {
		if _, err := auth(is.token(t, "k1", c, map[string]any{"email": "x@example.com"})); !errors.Is(err, inbound.ErrUnauthenticated) {
			t.Errorf("%s accepted: %v", name, err)
		}
	}
	if _, err := auth(is.token(t, "k1", good, nil)); err == nil {
		t.Error("token without the user claim accepted")
	}
	if _, err := auth("not.a.jwt"); err == nil {
		t.Error("garbage accepted")
	}
	// Key rotation: a token signed with a new key is accepted after one
	// refetch (refetches are at most one per 30 s).
	before := is.hits.Load()
	is.rotate(t, "k2")
	clock.Add(int64(31 * time.Second))
	if u, err := auth(is.token(t, "k2", good, map[string]any{"email": "bob@example.com"})); err != nil || u != "bob@example.com" {
		t.Fatalf("after rotation: user %q err %v", u, err)
	}
	if is.hits.Load() != before+1 {
		t.Errorf("JWKS fetched %d times for one rotation", is.hits.Load()-before)
	}
	// A token naming an unknown key id (validly signed, so only the kid is
	// wrong) refetches the JWKS at most once per 30 s, however often it
	// arrives (TestJWKSRefetchesBounded: many kids at once).
	before = is.hits.Load()
	for range 5 {
		if _, err := auth(is.tokenAs(t, "k2", "unknown", good, map[string]any{"email": "m@example.com"})); err == nil {
			t.Fatal("a token with an unknown kid was accepted")
		}
	}
	if n := is.hits.Load() - before; n != 1 {
		t.Errorf("one unknown kid within 30 s caused %d JWKS fetches, want 1", n)
	}
	clock.Add(int64(31 * time.Second))
	for range 5 {
		_, _ = auth(is.tokenAs(t, "k2", "unknown", good, map[string]any{"email": "m@example.com"}))
	}
	if n := is.hits.Load() - before; n != 2 {
		t.Errorf("the unknown kid 31 s later caused %d JWKS fetches in all, want 2", n)
	}
}

func TestJWTMetadataAndChallenge(t *testing.T) {
	is := newIssuer(t)
	a, err := inbound.New(inbound.Options{Mode: "jwt", JWKSURL: is.ts.URL, Issuer: "https://idp.example", Audience: "mcp-mux"})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	a.MetadataHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://mux.local"+inbound.MetadataPath, nil))
	var md map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &md); err != nil {
		t.Fatal(err)
	}
	if md["resource"] != "http://mux.local/mcp" || md["authorization_servers"].([]any)[0] != "https://idp.example" {
		t.Errorf("metadata = %v", md)
	}
	rec = httptest.NewRecorder()
	a.Challenge(rec, httptest.NewRequest(http.MethodPost, "http://mux.local/mcp", nil), inbound.ErrUnauthenticated)
	if rec.Code != 401 || !strings.Contains(rec.Header().Get("WWW-Authenticate"), `resource_metadata="http://mux.local/.well-known/oauth-protected-resource"`) {
		t.Errorf("challenge: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

// TestJWTProfileClaim: the profile claim's string value is the
// identity's Claim, and its JSON type its ClaimType ("" when absent), so
// that profile selection can refuse a claim that is not a string.
func TestJWTProfileClaim(t *testing.T) {
	is := newIssuer(t)
	a, err := inbound.New(inbound.Options{Mode: "jwt", JWKSURL: is.ts.URL, Issuer: "https://idp.example", Audience: "mcp-mux", ProfileClaim: "mux_profile"})
	if err != nil {
		t.Fatal(err)
	}
	c := jwt.Claims{Issuer: "https://idp.example", Audience: jwt.Audience{"mcp-mux"}, Subject: "u1", Expiry: jwt.NewNumericDate(time.Now().Add(time.Hour))}
	for _, tc := range []struct {
		v           any
		claim, kind string
	}{
		{"support", "support", "string"}, {"", "", "string"}, {7, "", "number"}, {[]string{"a"}, "", "array"},
		{map[string]any{"a": 1}, "", "object"}, {true, "", "boolean"}, {nil, "", "null"},
	} {
		id, err := a.Identify(request(map[string]string{"Authorization": "Bearer " + is.token(t, "k1", c, map[string]any{"mux_profile": tc.v})}))
		if err != nil || id.User != "u1" || id.Claim != tc.claim || id.ClaimType != tc.kind {
			t.Errorf("claim %v: identity %+v %v, want %q of type %s", tc.v, id, err, tc.claim, tc.kind)
		}
	}
	id, err := a.Identify(request(map[string]string{"Authorization": "Bearer " + is.token(t, "k1", c, nil)}))
	if err != nil || id.Claim != "" || id.ClaimType != "" {
		t.Errorf("no claim: identity %+v %v", id, err)
	}
}
