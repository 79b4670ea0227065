package sessionhost_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy/sessionhost"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := mcptest.LeakCheck(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func TestNegotiate(t *testing.T) {
	for in, want := range map[string]string{"2025-06-18": "2025-06-18", "2024-11-05": "2024-11-05", "2026-07-28": "2025-11-25", "": "2025-11-25", "1999-01-01": "2025-11-25"} {
		if got := sessionhost.Negotiate(in); got != want {
			t.Errorf("Negotiate(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckPOST: what go-sdk's handler refused before a session saw it.
func TestCheckPOST(t *testing.T) {
	for _, tc := range []struct {
		name, ct, accept, version string
		batch                     bool
		want                      int
	}{
		{"good", "application/json", "application/json, text/event-stream", "2025-11-25", false, 0},
		{"charset", "application/json; charset=utf-8", "*/*", "", false, 0},
		{"not JSON", "text/plain", "application/json, text/event-stream", "", false, http.StatusUnsupportedMediaType},
		{"JSON only", "application/json", "application/json", "", false, http.StatusBadRequest},
		{"unknown version", "application/json", "application/json, text/event-stream", "2099-01-01", false, http.StatusBadRequest},
		{"batch on 2025-06-18", "application/json", "application/json, text/event-stream", "2025-06-18", true, http.StatusBadRequest},
		{"batch on 2025-03-26", "application/json", "application/json, text/event-stream", "2025-03-26", true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Header.Set("Content-Type", tc.ct)
			r.Header.Set("Accept", tc.accept)
			if tc.version != "" {
				r.Header.Set("Mcp-Protocol-Version", tc.version)
			}
			w := httptest.NewRecorder()
			ok := sessionhost.CheckPOST(w, r, tc.batch)
			if ok != (tc.want == 0) || (!ok && w.Code != tc.want) {
				t.Fatalf("CheckPOST = %v, HTTP %d; want %d", ok, w.Code, tc.want)
			}
		})
	}
}

// TestResidentsComeAndGo: a session's SDK side is resident while it has
// requests, stays while one is held, goes when idle, and is rebuilt from
// its state on the next request.
func TestResidentsComeAndGo(t *testing.T) {
	h := sessionhost.New(sessionhost.Options{SDK: mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil), ResidentIdle: 50 * time.Millisecond})
	t.Cleanup(h.Close)
	var builds atomic.Int32
	state := func() *mcp.ServerSessionState {
		builds.Add(1)
		return &mcp.ServerSessionState{InitializeParams: &mcp.InitializeParams{ProtocolVersion: "2025-11-25"}, InitializedParams: &mcp.InitializedParams{}, NegotiatedProtocolVersion: "2025-11-25"}
	}
	held, err := h.Open("SESSIONAAAAAAAAAAAAAA", state)
	if err != nil {
		t.Fatal(err)
	}
	if held.Session().ID() != "SESSIONAAAAAAAAAAAAAA" || held.Session().InitializeParams() == nil {
		t.Fatalf("rebuilt session: id %q, initialize params %v", held.Session().ID(), held.Session().InitializeParams())
	}
	other, err := h.Open("SESSIONBBBBBBBBBBBBBB", state)
	if err != nil {
		t.Fatal(err)
	}
	other.Release()
	waitFor(t, "the idle session to be evicted", func() bool { return !h.Resident("SESSIONBBBBBBBBBBBBBB") })
	if !h.Resident("SESSIONAAAAAAAAAAAAAA") {
		t.Fatal("a session with a request in flight was evicted")
	}
	held.Release()
	waitFor(t, "every session to be evicted", func() bool { return h.Count() == 0 })
	again, err := h.Open("SESSIONAAAAAAAAAAAAAA", state)
	if err != nil {
		t.Fatal(err)
	}
	again.Release()
	if n := builds.Load(); n != 3 {
		t.Fatalf("%d builds, want 3 (two sessions, one rebuilt)", n)
	}
	h.Close()
	if _, err := h.Open("SESSIONCCCCCCCCCCCCCC", state); err == nil {
		t.Fatal("Open after Close")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestServeStream: a GET stream is a priming event, then the log's events
// with their ids, and ends with a retry hint when the replica drains; on
// HTTP/1.1 (the connection taken over) and on HTTP/2 (the handler holds it).
func TestServeStream(t *testing.T) {
	t.Run("http1", func(t *testing.T) { testServeStream(t, false) })
	t.Run("http2", func(t *testing.T) { testServeStream(t, true) })
}

func testServeStream(t *testing.T, h2 bool) {
	store := sessionstore.NewLocal(sessionstore.Options{})
	t.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	rec := &sessionstore.Record{ID: sessionstore.NewID(), User: "u"}
	if err := store.Create(ctx, rec, sessionstore.Bounds{}); err != nil {
		t.Fatal(err)
	}
	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	ended := make(chan struct{})
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := store.Follow(r.Context(), rec.ID, "")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		sessionhost.ServeStream(w, r, f, sessionhost.StreamOptions{Stop: stopCtx, Retry: 300 * time.Millisecond,
			Ended: func() { f.Close(); close(ended) }})
	}))
	ts.EnableHTTP2 = h2
	if h2 {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	resp, err := ts.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if h2 != (resp.ProtoMajor == 2) {
		t.Fatalf("served over %s", resp.Proto)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	event := func() map[string]string {
		t.Helper()
		e := map[string]string{}
		for sc.Scan() {
			line := sc.Text()
			if line == "" {
				return e
			}
			k, v, _ := strings.Cut(line, ": ")
			e[k] += v
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return nil
	}
	prime := event()
	if _, ok := sessionstore.LastEventID(prime["id"]); !ok || prime["data"] != "" {
		t.Fatalf("priming event %v", prime)
	}
	msg := json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}`)
	if err := store.Append(ctx, rec.ID, msg); err != nil {
		t.Fatal(err)
	}
	e := event()
	if e["data"] != string(msg) || e["event"] != "message" || e["id"] == "" {
		t.Fatalf("event %v", e)
	}
	stop()
	last := event()
	if last["retry"] != "300" || !strings.HasPrefix(last["id"], e["id"]+"_") {
		t.Fatalf("closing event %v, want retry 300 and the position after %s", last, e["id"])
	}
	if sc.Scan() {
		t.Fatalf("the stream goes on after the drain: %q", sc.Text())
	}
	<-ended
}
