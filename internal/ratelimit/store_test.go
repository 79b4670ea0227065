package ratelimit_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/ratelimit"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// TestStoreClientMustHonourDeadlines: New refuses a client whose round
// trips its context's deadline does not end.
func TestStoreClientMustHonourDeadlines(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c.Close()
	_, err := ratelimit.New(ratelimit.Options{Store: &ratelimit.Store{Client: c}})
	if err == nil || !strings.Contains(err.Error(), "ContextTimeoutEnabled") {
		t.Fatalf("New with a client that ignores deadlines: %v", err)
	}
	if _, err := storeclient.Dial("http://x"); err == nil || strings.Contains(err.Error(), "http://x") {
		t.Fatalf("Dial of a bad URL: %v (it must not repeat the URL)", err)
	}
}

// TestSilentStoreDecidedWithinTimeout: a store that accepts connections
// and never answers decides a call within its 1 s timeout (failing closed
// here), on a client from Dial; past 3 s (room for a loaded machine)
// fails.
func TestSilentStoreDecidedWithinTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	c, err := storeclient.Dial("redis://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	l, err := ratelimit.New(ratelimit.Options{Store: &ratelimit.Store{Client: c, KeyPrefix: "silent:"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	lim := perCallerTool(100, 4)
	lim.FailClosed = true
	l.SetRules(lim)
	start := time.Now()
	d := l.Admit(context.Background(), alice)
	took := time.Since(start)
	if d.Allowed || d.Kind != ratelimit.KindStore {
		t.Fatalf("failing closed against a silent store: %+v", d)
	}
	if took > 3*time.Second {
		t.Fatalf("a call waited %v for a store that never answers; the bound is 1s", took)
	}
	t.Logf("decided in %v", took)
}
