package headers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 32, attack 12: every outbound credential request (token exchange,
// OAuth token fetches and refreshes, discovery) follows no redirect, and
// token exchanges are bounded per server and per caller and end when no
// caller waits for them.

// recorder is a server that counts what reaches it: the target of a
// redirect, which must receive nothing.
type recorder struct {
	*httptest.Server
	hits atomic.Int32
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"stolen-token","token_type":"Bearer","expires_in":3600}`)
	}))
	t.Cleanup(rec.Close)
	return rec
}

// redirector answers every request with a 307 to target (same path) and a
// body that must reach no message.
func redirector(t *testing.T, target string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", target+r.URL.Path)
		w.WriteHeader(http.StatusTemporaryRedirect)
		_, _ = io.WriteString(w, "REDIRECT-BODY-sekret")
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestCredentialRequestsFollowNoRedirect: a token endpoint (exchange,
// client credentials, refresh) or a discovery URL that answers 307 is an
// error naming the endpoint; the redirect target gets nothing — not the
// client secret, not the caller's subject token.
func TestCredentialRequestsFollowNoRedirect(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(url string) Options
	}{
		{"token exchange", func(u string) Options {
			return Options{Server: "api", TokenExchange: &ExchangeOptions{TokenURL: u + "/token", ClientID: "mux", ClientSecret: "mux-secret", AuthStyle: AuthStylePost}}
		}},
		{"client credentials", func(u string) Options {
			return Options{Server: "api", OAuth: &OAuthOptions{TokenURL: u + "/token", ClientID: "mux", ClientSecret: "mux-secret"}}
		}},
		{"refresh token", func(u string) Options {
			return Options{Server: "api", OAuth: &OAuthOptions{TokenURL: u + "/token", GrantType: GrantRefreshToken, RefreshToken: "refresh-sekret", ClientID: "mux"}}
		}},
		{"discovery", func(u string) Options {
			return Options{Server: "api", OAuth: &OAuthOptions{ResourceURL: u + "/mcp", ClientID: "mux", ClientSecret: "mux-secret"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := newRecorder(t)
			from := redirector(t, target.URL)
			r := mustNew(t, tc.opts(from.URL))
			t.Cleanup(r.Close)
			_, err := r.ForRequest(context.Background(), "alice", nil, bearerOf("alice-subject-sekret"))
			if err == nil {
				t.Fatal("a redirected credential request succeeded")
			}
			if n := target.hits.Load(); n != 0 {
				t.Errorf("the redirect target got %d requests, want 0", n)
			}
			msg := err.Error()
			if !strings.Contains(msg, "redirect") || !strings.Contains(msg, from.URL) {
				t.Errorf("error %q: want it to name the endpoint and the redirect", msg)
			}
			for _, s := range []string{"REDIRECT-BODY", "sekret", target.URL} {
				if strings.Contains(msg, s) {
					t.Errorf("error %q contains %q", msg, s)
				}
			}
		})
	}
}

// hangingEndpoint is a token exchange endpoint that holds every request
// until its client gives up (or release is closed), counting the requests
// in flight and the most at once.
type hangingEndpoint struct {
	*httptest.Server
	release             chan struct{}
	once                sync.Once
	hits, inflight, max atomic.Int32
}

func newHangingEndpoint(t *testing.T) *hangingEndpoint {
	t.Helper()
	h := &hangingEndpoint{release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.hits.Add(1)
		n := h.inflight.Add(1)
		defer h.inflight.Add(-1)
		for m := h.max.Load(); n > m && !h.max.CompareAndSwap(m, n); m = h.max.Load() {
		}
		_ = r.ParseForm()
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"up-%s","token_type":"N_A","expires_in":3600}`, r.PostForm.Get("subject_token"))
	}))
	t.Cleanup(h.Close)
	t.Cleanup(h.releaseAll)
	return h
}

// releaseAll answers the requests held and every later one.
func (h *hangingEndpoint) releaseAll() { h.once.Do(func() { close(h.release) }) }

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// waitUntil polls cond until it holds; after the timeout the test fails
// with what and the figure got returns.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool, got func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after %s", what, got(), timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// countingTransport counts the requests the mux has in flight — from
// RoundTrip until the response body is closed — and the most at once.
type countingTransport struct {
	*http.Transport
	inflight, max atomic.Int32
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	n := c.inflight.Add(1)
	for m := c.max.Load(); n > m && !c.max.CompareAndSwap(m, n); m = c.max.Load() {
	}
	resp, err := c.Transport.RoundTrip(req)
	if err != nil {
		c.inflight.Add(-1)
		return nil, err
	}
	resp.Body = &countedBody{ReadCloser: resp.Body, done: func() { c.inflight.Add(-1) }}
	return resp, nil
}

// countedBody calls done once, when it is closed.
type countedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *countedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// abandonedResolver is a token exchange Resolver against h with a client
// of its own, so the test can count its requests and close its idle
// connections.
func abandonedResolver(t *testing.T, h *hangingEndpoint) (*Resolver, *countingTransport) {
	t.Helper()
	tr := &countingTransport{Transport: &http.Transport{}}
	t.Cleanup(tr.CloseIdleConnections)
	r := mustNew(t, Options{Server: "api", HTTPClient: &http.Client{Transport: tr, Timeout: tokenTimeout},
		TokenExchange: &ExchangeOptions{TokenURL: h.URL + "/token", ClientID: "mux", ClientSecret: "mux-secret", TokenPrefix: "Bearer"}})
	t.Cleanup(r.Close)
	return r, tr
}

// TestExchangeAbandonedCallers: 1,000 callers, each with its own subject
// token, call while the token endpoint hangs and then give up. At most
// exchangeConcurrency exchanges are ever in flight, and once the callers
// are gone so are their exchanges: the endpoint sees every request end,
// and the goroutines and open files return to where they were.
func TestExchangeAbandonedCallers(t *testing.T) {
	h := newHangingEndpoint(t)
	r, tr := abandonedResolver(t, h)
	baseG, baseFD := runtime.NumGoroutine(), openFDs(t)
	ctx, giveUp := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Go(func() {
			if _, err := r.ForRequest(ctx, fmt.Sprintf("user-%d", i), nil, bearerOf(fmt.Sprintf("subject-%d", i))); err == nil {
				t.Error("an exchange succeeded against a hanging endpoint")
			}
		})
	}
	waitUntil(t, time.Minute, "exchanges reaching the endpoint", func() bool { return h.inflight.Load() >= 32 },
		func() string { return fmt.Sprint(h.inflight.Load(), " in flight") })
	giveUp()
	wg.Wait()
	waitUntil(t, 10*time.Second, "exchanges in flight after every caller left (the token request timeout is 15 s)", func() bool { return h.inflight.Load() == 0 },
		func() string { return fmt.Sprint(h.inflight.Load()) })
	tr.CloseIdleConnections()
	waitUntil(t, 10*time.Second, "goroutines and open files after every caller left", func() bool {
		return runtime.NumGoroutine() <= baseG+5 && openFDs(t) <= baseFD+5
	}, func() string {
		return fmt.Sprintf("%d goroutines (from %d) and %d fds (from %d)", runtime.NumGoroutine(), baseG, openFDs(t), baseFD)
	})
	if m := tr.max.Load(); m > exchangeConcurrencyWant {
		t.Errorf("1,000 callers had %d exchanges in flight at once, want at most %d", m, exchangeConcurrencyWant)
	}
	t.Logf("most exchanges in flight: %d (at the endpoint, which learns of an end later: %d), endpoint requests: %d", tr.max.Load(), h.max.Load(), h.hits.Load())
}

// exchangeConcurrencyWant and exchangePerCallerWant are the bounds the
// tests hold the exchanger to.
const (
	exchangeConcurrencyWant = 32
	exchangePerCallerWant   = 4
)

// TestExchangeOneCallerBounded: one caller sending 1,000 different subject
// tokens at once holds at most exchangePerCaller exchanges in flight; the
// rest are refused at once, naming the server, and other callers still
// get theirs.
func TestExchangeOneCallerBounded(t *testing.T) {
	h := newHangingEndpoint(t)
	r, tr := abandonedResolver(t, h)
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	var wg sync.WaitGroup
	var refused atomic.Int32
	for i := range 1000 {
		wg.Go(func() {
			_, err := r.ForRequest(ctx, "mallory", nil, bearerOf(fmt.Sprintf("subject-%d", i)))
			var d *DenyError
			if ctx.Err() == nil && errors.As(err, &d) && strings.Contains(d.Msg, "MCP server 'api'") {
				refused.Add(1)
			}
		})
	}
	waitUntil(t, time.Minute, "one caller's 1,000 exchanges refused or in flight", func() bool { return int(refused.Load()+h.inflight.Load()) >= 1000 },
		func() string { return fmt.Sprintf("%d refused, %d in flight", refused.Load(), h.inflight.Load()) })
	if n := tr.max.Load(); n > exchangePerCallerWant {
		t.Errorf("one caller had %d exchanges in flight, want at most %d", n, exchangePerCallerWant)
	}
	// Another caller is not held up by mallory's.
	done := make(chan error, 1)
	go func() {
		_, err := r.ForRequest(context.Background(), "alice", nil, bearerOf("alice-subject"))
		done <- err
	}()
	waitUntil(t, time.Minute, "alice's exchange", func() bool { return h.hits.Load() > int32(exchangePerCallerWant) }, func() string { return "not at the endpoint" })
	h.releaseAll()
	if err := <-done; err != nil {
		t.Errorf("alice's exchange: %v", err)
	}
	giveUp()
	wg.Wait()
}

// TestExchangeEndsWithItsLastCaller: an exchange goes on while any caller
// waits for it and is cancelled when the last one leaves; nothing is
// cached, and the next call exchanges anew.
func TestExchangeEndsWithItsLastCaller(t *testing.T) {
	h := newHangingEndpoint(t)
	r, _ := abandonedResolver(t, h)
	first, leaveFirst := context.WithCancel(context.Background())
	second, leaveSecond := context.WithCancel(context.Background())
	errs := make(chan error, 2)
	for _, ctx := range []context.Context{first, second} {
		go func() {
			_, err := r.ForRequest(ctx, "alice", nil, bearerOf("alice-subject"))
			errs <- err
		}()
	}
	waitUntil(t, time.Minute, "the exchange", func() bool { return h.inflight.Load() == 1 }, func() string { return "not at the endpoint" })
	leaveFirst()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first caller left: %v", err)
	}
	if h.inflight.Load() != 1 {
		t.Fatal("the exchange ended while a caller still waited for it")
	}
	leaveSecond()
	<-errs
	waitUntil(t, 10*time.Second, "the exchange after its last caller left (the token request timeout is 15 s)", func() bool { return h.inflight.Load() == 0 },
		func() string { return "in flight" })
	h.releaseAll()
	v, err := r.ForRequest(context.Background(), "alice", nil, bearerOf("alice-subject"))
	if err != nil || v.Get("Authorization") != "Bearer up-alice-subject" || h.hits.Load() != 2 {
		t.Fatalf("after the cancelled exchange: %v %v, %d endpoint requests; want a new exchange", v, err, h.hits.Load())
	}
}
