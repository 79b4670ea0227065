package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/storeclient"
)

// userRT sends every request as user (trusted_header mode).
type userRT struct {
	user string
	next http.RoundTripper
}

func (u userRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Mux-User", u.user)
	return u.next.RoundTrip(r)
}

// Issue 32: a caller's hash in audit records is keyed by the secret the
// replicas share. Two replicas on one Redis (no request_state_key) give
// alice one hash; a mux under another key prefix (so another shared
// secret) gives her another; two muxes without Redis but with one
// request_state_key agree; and none is her unkeyed SHA-256, which a
// dictionary of user names would find.
func TestCallerHashSharedByReplicas(t *testing.T) {
	t.Parallel()
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	prefix := fmt.Sprintf("idhash-%d-%d:", os.Getpid(), time.Now().UnixNano())
	rdb, err := storeclient.Dial("redis://127.0.0.1:6379")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			_ = rdb.Del(context.Background(), keys...).Err()
		}
		_ = rdb.Close()
	})
	hc := newHTTPClient(t)
	// caller runs a mux with extra config, calls web_echo as alice and
	// returns the caller of its audit record.
	caller := func(extra map[string]any) string {
		dir := t.TempDir()
		path := filepath.Join(dir, "audit.jsonl")
		doc := map[string]any{
			"mcpServers": map[string]any{"web": map[string]any{"type": "http", "url": up.URL + "/mcp"}},
			"inbound":    map[string]any{"auth": map[string]any{"mode": "trusted_header"}},
			"telemetry":  map[string]any{"audit": map[string]any{"enabled": true, "output": path}},
		}
		for k, v := range extra {
			if k == "request_state_key" {
				doc["inbound"].(map[string]any)[k] = v
				continue
			}
			doc[k] = v
		}
		s := startServe(t, dir, nil, "--config", writeFile(t, dir, "mux.json", mustJSON(t, doc)), "--listen", "127.0.0.1:0")
		if !s.stderr.WaitFor(30*time.Second, s.done, func(out string) bool { return findLog(out, "startup summary") != nil }) {
			t.Fatal("web was not discovered")
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "idhash", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: s.url("/mcp"),
			HTTPClient: &http.Client{Transport: userRT{"alice", hc.Transport}}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			t.Fatal(err)
		}
		if res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_echo", Arguments: map[string]any{"text": "x"}}); err != nil || res.IsError {
			t.Fatalf("call: %v %+v", err, res)
		}
		_ = cs.Close()
		if code := s.stop(30 * time.Second); code != 0 {
			t.Fatalf("exit %d", code)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ Caller string }
		if err := json.Unmarshal([]byte(strings.SplitN(string(raw), "\n", 2)[0]), &r); err != nil || r.Caller == "" {
			t.Fatalf("no record with a caller: %v %s", err, raw)
		}
		return r.Caller
	}
	store := func(p string) map[string]any {
		return map[string]any{"store": map[string]any{"redis_url": "redis://127.0.0.1:6379", "key_prefix": p}}
	}
	const stateKey = "idhash-test-request-state-key-0123456789abcdef"
	one, two, other := caller(store(prefix)), caller(store(prefix)), caller(store(prefix+"other:"))
	keyed1, keyed2 := caller(map[string]any{"request_state_key": stateKey}), caller(map[string]any{"request_state_key": stateKey})
	alone := caller(nil)
	sum := sha256.Sum256([]byte("alice"))
	t.Logf("alice: %s and %s on one Redis, %s under another prefix, %s and %s with one request_state_key, %s alone", one, two, other, keyed1, keyed2, alone)
	if one != two || keyed1 != keyed2 {
		t.Errorf("replicas that share a secret disagree on alice: %s / %s, %s / %s", one, two, keyed1, keyed2)
	}
	if other == one || keyed1 == one || alone == one || alone == keyed1 {
		t.Errorf("muxes with different secrets agree on alice")
	}
	for _, h := range []string{one, other, keyed1, alone} {
		if strings.Contains(h, hex.EncodeToString(sum[:12])) || strings.Contains(h, "alice") {
			t.Errorf("alice's hash %s is found without the key", h)
		}
	}
}
