package upstream_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// bearerFront serves target behind a Bearer check: a request without
// "Authorization: Bearer <want>" gets 401 with challenge (and one more,
// oversized challenge value that must be dropped).
func bearerFront(t *testing.T, target string, want *atomic.Value, challenge string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := want.Load().(string)
		if tok == "" || r.Header.Get("Authorization") != "Bearer "+tok {
			w.Header().Add("WWW-Authenticate", challenge)
			w.Header().Add("WWW-Authenticate", "Bearer realm=\""+strings.Repeat("x", 4096)+"\"")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestRefusalKeepsChallengesAndTeachesNoEra: a server that wants a token
// nobody has yet refuses the era probe and the first discovery with 401.
// The refusal carries the server's challenge (bounded: an oversized value
// is dropped), and the probe's 401 is not taken for an answer: once a
// token is sent, the server's 2026-07-28 is learned. (Learning "legacy"
// from the 401 pinned every later session of such a server to 2025-11-25.)
func TestRefusalKeepsChallengesAndTeachesNoEra(t *testing.T) {
	backend := mcptest.ServeHTTPBothEras(t, mcptest.NewServer("test"))
	var want atomic.Value
	const challenge = `Bearer error="invalid_token", resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource/mcp", scope="files:read"`
	front := bearerFront(t, backend.URL, &want, challenge)
	var token atomic.Value
	o := upstream.Options{Name: "web", Transport: upstream.HTTP, URL: front.URL + "/mcp", RetryMin: 20 * time.Millisecond, RetryMax: 50 * time.Millisecond,
		InitTimeout: 5 * time.Second,
		BaseHeaders: func(context.Context) (http.Header, error) {
			h := http.Header{}
			if tok, _ := token.Load().(string); tok != "" {
				h.Set("Authorization", "Bearer "+tok)
			}
			return h, nil
		}}
	want.Store("t0k3n")
	u := startNoWait(t, o)
	select {
	case <-u.Discovered():
	case <-time.After(10 * time.Second):
		t.Fatal("the first discovery did not end")
	}
	refusal, ok := errors.AsType[*upstream.StatusError](u.Err())
	if !ok || refusal.Code != http.StatusUnauthorized {
		t.Fatalf("discovery error = %v, want a *StatusError 401", u.Err())
	}
	if len(refusal.Challenges) != 1 || refusal.Challenges[0] != challenge {
		t.Fatalf("challenges = %q, want only the server's bounded one", refusal.Challenges)
	}
	if era := u.Era(); era != "" {
		t.Fatalf("after a refused probe the era is %q, want unknown", era)
	}
	token.Store("t0k3n")
	deadline := time.Now().Add(10 * time.Second)
	for u.Err() != nil || u.Tools() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("discovery with the token did not succeed: %v", u.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if era := u.Era(); era != upstream.VersionModern {
		t.Fatalf("era after the token = %q, want %q", era, upstream.VersionModern)
	}
}

// TestRediscoverCutsTheBackoffShort: a server refused for want of a token
// is retried on its backoff (a minute here); Rediscover, told a token
// arrived, runs the next round at once.
func TestRediscoverCutsTheBackoffShort(t *testing.T) {
	backend := mcptest.ServeHTTPBothEras(t, mcptest.NewServer("test"))
	var want, token atomic.Value
	want.Store("t0k3n")
	front := bearerFront(t, backend.URL, &want, `Bearer error="invalid_token"`)
	u := startNoWait(t, upstream.Options{Name: "web", Transport: upstream.HTTP, URL: front.URL + "/mcp", RetryMin: time.Minute, RetryMax: time.Minute,
		InitTimeout: 5 * time.Second,
		BaseHeaders: func(context.Context) (http.Header, error) {
			h := http.Header{}
			if tok, _ := token.Load().(string); tok != "" {
				h.Set("Authorization", "Bearer "+tok)
			}
			return h, nil
		}})
	<-u.Discovered()
	if u.Err() == nil {
		t.Fatal("discovery without a token succeeded")
	}
	token.Store("t0k3n")
	u.Rediscover()
	deadline := time.Now().Add(10 * time.Second)
	for u.Err() != nil || len(u.Tools()) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no discovery within 10 s of Rediscover: %v", u.Err())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
