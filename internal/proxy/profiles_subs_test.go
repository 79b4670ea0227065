package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// A profile limits resource subscriptions as it limits reads: alice's
// profile has servers alpha and gamma (two, so no URI falls back to the
// only server with resources), so her resources/subscribe of beta's
// resource is "resource not found", and a 2026-07-28 subscriptions/listen
// (on either path) acknowledges only alpha's URI; beta never hears of her.
func TestProfileLimitsSubscriptions(t *testing.T) {
	alpha := newWatchServer(t, "alpha", "res://alpha", false)
	beta := newWatchServer(t, "beta", "res://beta", false)
	gamma := newWatchServer(t, "gamma", "res://gamma", false)
	cfg := fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "http", "url": %q}, "beta": {"type": "http", "url": %q}, "gamma": {"type": "http", "url": %q}},
	  "profiles": {"a": {"servers": ["alpha", "gamma"]}, "b": {"servers": ["beta"]}},
	  "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "$ALICE_KEY", "bob": "$BOB_KEY"}},
	    "profile_by": {"api_keys": {"alice": "a", "bob": "b"}}}}`, alpha.url, beta.url, gamma.url)
	m, _ := startMuxEnv(t, cfg, map[string]string{"ALICE_KEY": aliceKey, "BOB_KEY": bobKey}, proxy.Options{})
	url := m.ts.URL + "/mcp"
	ctx := context.Background()

	t.Run("resources/subscribe", func(t *testing.T) {
		cs, err := connectProfile(t, url, aliceKey)
		if err != nil {
			t.Fatal(err)
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: beta.uri}); err == nil || !strings.Contains(strings.ToLower(err.Error()), "resource not found") {
			t.Fatalf("alice subscribes to beta's resource: %v, want resource not found", err)
		}
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: alpha.uri}); err != nil {
			t.Fatalf("alice subscribes to her resource: %v", err)
		}
		if beta.calls.Load() != 0 || alpha.calls.Load() != 1 {
			t.Fatalf("subscribes reaching alpha %d, beta %d; want 1 and 0", alpha.calls.Load(), beta.calls.Load())
		}
	})
	for _, sdk := range []bool{false, true} {
		t.Run(fmt.Sprintf("subscriptions/listen, SDK path %v", sdk), func(t *testing.T) {
			h := listenHeaders("", sdk)
			delete(h, "X-User")
			h["Authorization"] = "Bearer " + aliceKey
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			s := openStream(t, ctx, url, h, listenBody("l", beta.uri, alpha.uri))
			ack := s.next(t)
			var p struct {
				Params struct {
					Notifications struct {
						ResourceSubscriptions []string `json:"resourceSubscriptions"`
					} `json:"notifications"`
				} `json:"params"`
			}
			b, _ := json.Marshal(ack)
			if err := json.Unmarshal(b, &p); err != nil || !slices.Equal(p.Params.Notifications.ResourceSubscriptions, []string{alpha.uri}) {
				t.Fatalf("alice's listen acknowledged %s, want only %s", b, alpha.uri)
			}
			if beta.calls.Load() != 0 {
				t.Fatalf("alice's listen subscribed at beta (%d)", beta.calls.Load())
			}
		})
	}
}

// listenHeaders are a listen's headers as user; sdk spells the
// Content-Type in capitals, which the SDK accepts and the fast path leaves
// to it.
func listenHeaders(user string, sdk bool) map[string]string {
	h := modernHeaders("subscriptions/listen", "")
	h["X-User"] = user
	if sdk {
		h["Content-Type"] = "Application/JSON"
	}
	return h
}

// listenBody is a listen with id that subscribes to uris.
func listenBody(id string, uris ...string) string {
	return `{"jsonrpc":"2.0","id":"` + id + `","method":"subscriptions/listen","params":{` + modernMeta("{}") +
		`,"notifications":{"resourceSubscriptions":["` + strings.Join(uris, `","`) + `"]}}}`
}
