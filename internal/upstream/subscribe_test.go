package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/upstream"
)

// Resource subscriptions on a 2026-07-28 server are subscriptions/listen
// streams: at most MaxResourceListens, past it a clear error; ending one
// makes room.
func TestModernResourceListensBounded(t *testing.T) {
	var open atomic.Int64
	s := mcp.NewServer(&mcp.Implementation{Name: "subs", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { open.Add(1); return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { open.Add(-1); return nil },
	})
	s.AddResource(&mcp.Resource{URI: "res://0", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	u := start(t, upstream.Options{Name: "web", Transport: upstream.HTTP, URL: ts.URL + "/mcp"})
	if u.Era() != upstream.VersionModern {
		t.Fatalf("era %q", u.Era())
	}
	ctx := context.Background()
	for i := range upstream.MaxResourceListens {
		if err := u.Subscribe(ctx, fmt.Sprintf("res://%d", i), true); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	waitFor(t, 30*time.Second, "every listen stream open upstream", func() bool { return open.Load() == upstream.MaxResourceListens })
	err := u.Subscribe(ctx, "res://one-more", true)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("at most %d resource subscriptions", upstream.MaxResourceListens)) {
		t.Fatalf("subscription past the bound: %v", err)
	}
	if err := u.Subscribe(ctx, "res://0", true); err != nil {
		t.Errorf("renewing a held subscription: %v", err)
	}
	if err := u.Subscribe(ctx, "res://0", false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the ended listen to close upstream", func() bool { return open.Load() == upstream.MaxResourceListens-1 })
	if err := u.Subscribe(ctx, "res://one-more", true); err != nil {
		t.Errorf("subscription after one ended: %v", err)
	}
	if err := u.Close(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "Close to end every listen", func() bool { return open.Load() == 0 })
}

// A 2026-07-28 server that offers no subscriptions is not sent a listen for
// one: subscribing is an error at once, and holds no place.
func TestModernSubscribeRefusedWithoutCapability(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "nosubs", Version: "1"}, nil)
	s.AddResource(&mcp.Resource{URI: "res://0", Name: "r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(ts.Close)
	u := start(t, upstream.Options{Name: "web", Transport: upstream.HTTP, URL: ts.URL + "/mcp"})
	for range upstream.MaxResourceListens + 1 {
		err := u.Subscribe(context.Background(), "res://0", true)
		if err == nil || !strings.Contains(err.Error(), "does not offer resource subscriptions") {
			t.Fatalf("Subscribe = %v", err)
		}
	}
}

// notes is a Handler that passes on the notifications it gets.
type notes chan string

func (n notes) ServerRequest(context.Context, upstream.Key, string, json.RawMessage) (json.RawMessage, error) {
	return nil, errors.New("no requests expected")
}

func (n notes) ServerNotification(_ context.Context, _ upstream.Key, method string, params json.RawMessage) {
	select {
	case n <- method + " " + string(params):
	default:
	}
}

// Over stdio, a 2026-07-28 server's resource subscription is a
// subscriptions/listen on the discovery process: its updates arrive (without
// the upstream's listen id), and unsubscribing ends the listen.
func TestStdioModernResourceSubscription(t *testing.T) {
	dir := t.TempDir()
	got := make(notes, 64)
	o := stdioOptions("local", mcptest.StdioOptions{SubsDir: dir})
	o.Handler = got
	u := start(t, o)
	if u.Era() != upstream.VersionModern {
		t.Fatalf("era %q", u.Era())
	}
	if err := u.Subscribe(context.Background(), mcptest.SubsResource, true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the server to see the subscription", func() bool { return exists(filepath.Join(dir, "subscribed")) })
	select {
	case n := <-got:
		if want := `notifications/resources/updated {"uri":"` + mcptest.SubsResource + `"}`; n != want {
			t.Errorf("got %s, want %s", n, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no update arrived")
	}
	if err := u.Subscribe(context.Background(), mcptest.SubsResource, false); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the server to see the listen end", func() bool { return exists(filepath.Join(dir, "unsubscribed")) })
}
