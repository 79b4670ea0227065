package accounts

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/mcp-mux/mcp-mux/internal/seal"
)

// Two replicas on one Redis (and one Cluster): the consent starts on A,
// the browser lands on B; A's Wait returns, A reads the token B stored,
// and B's Result says done.
func TestCrossReplica(t *testing.T) {
	for _, kind := range []string{"redis", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			store := newStoreFn(t, kind)
			f := newFixture(t)
			a := newEnv(t, f, store(), nil)
			b := newEnv(t, f, store(), nil)
			c, err := a.start("alice", StartRequest{Session: "s"})
			if err != nil {
				t.Fatal(err)
			}
			waited := a.waitAsync(c.ID)
			time.Sleep(50 * time.Millisecond) // let Wait subscribe; the 1 s re-check covers a miss anyway
			loc := a.redirect(c.URL)
			if st, body := get(t, b.mux.URL+"/oauth/callback?"+loc.RawQuery); st != 200 {
				t.Fatalf("callback on B: %d %s", st, body)
			}
			begin := time.Now()
			if err := <-waited; err != nil {
				t.Fatalf("Wait on A: %v", err)
			}
			if d := time.Since(begin); d > 800*time.Millisecond {
				t.Errorf("A woke after %v: the publish did not reach it", d)
			}
			if done, err := b.m.Result(context.Background(), c.ID); !done || err != nil {
				t.Errorf("Result on B: %v %v", done, err)
			}
			a.m.mu.Lock()
			if len(a.m.local) != 0 {
				t.Error("A still remembers the consent B completed")
			}
			a.m.mu.Unlock()
			if _, err := a.token("alice"); err != nil {
				t.Errorf("Token on A: %v", err)
			}
		})
	}
}

// Replicas refreshing one user's token at once: one refresh across both
// (the store lock), and both return its token.
func TestCrossReplicaRefresh(t *testing.T) {
	for _, kind := range []string{"redis", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			store := newStoreFn(t, kind)
			f := newFixture(t)
			f.expiresIn = 600
			var clock offsetClock
			withClock := func(o *Options) { o.Now = clock.now }
			a, b := newEnv(t, f, store(), withClock), newEnv(t, f, store(), withClock)
			a.connect("alice")
			f.set(func(f *fixture) { f.expiresIn, f.refreshDelay = 7200, 300*time.Millisecond })
			clock.set(600 * time.Second)
			got := tokensAtOnce(t, "alice", 10, a, b)
			if f.refreshes != 1 || len(slices.Compact(slices.Clone(got))) != 1 {
				t.Errorf("%d refreshes; tokens %v", f.refreshes, got)
			}
		})
	}
}

// A Manager under another key opens nothing of the first's: not its
// states, not its vault.
func TestOtherKey(t *testing.T) {
	f := newFixture(t)
	e, s := boltEnv(t, f, nil)
	e.connect("alice")
	c, _ := e.start("bob", StartRequest{})
	loc := e.redirect(c.URL)
	o, err := New(Options{PublicURL: "https://mux.example.com", Sealer: seal.New("another-key-0123456789abcdef0123456789"),
		Store: s, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Configure([]ServerConfig{{Name: "srv", URL: f.url()}})
	if _, err := o.Token(context.Background(), "alice", "srv"); err == nil {
		t.Error("another key read alice's token")
	}
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/callback?"+loc.RawQuery, nil))
	if rec.Code != 400 {
		t.Errorf("another key accepted the state: %d", rec.Code)
	}
	if got := rec.Header().Get("Cache-Control"); got != "no-store" || rec.Header().Get("Referrer-Policy") != "no-referrer" {
		t.Errorf("headers %v", rec.Header())
	}
}
