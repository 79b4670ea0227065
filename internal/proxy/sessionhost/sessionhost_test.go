package sessionhost_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/listenstream"
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

// TestServeStreamKept (issue 34): a GET stream taken over and watched by a
// Keeper (no goroutine of its own) gets keep-alive comments while idle and
// its events between them; a client that leaves is found within two
// keep-alive intervals, and a follower that ends (the session was
// deleted) ends its stream: each time Ended runs and the keeper forgets
// the stream.
func TestServeStreamKept(t *testing.T) {
	store := sessionstore.NewLocal(sessionstore.Options{})
	t.Cleanup(func() { _ = store.Close() })
	keeper := listenstream.NewKeeper(50 * time.Millisecond)
	t.Cleanup(keeper.Close)
	ctx := context.Background()
	ended := make(chan string, 2)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("s")
		f, err := store.Follow(r.Context(), id, "")
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		sessionhost.ServeStream(w, r, f, sessionhost.StreamOptions{Retry: time.Second, Keeper: keeper,
			Ended: func() { f.Close(); ended <- id }})
	}))
	t.Cleanup(ts.Close)
	open := func() (string, *http.Response, *bufio.Reader) {
		rec := &sessionstore.Record{ID: sessionstore.NewID(), User: "u"}
		if err := store.Create(ctx, rec, sessionstore.Bounds{}); err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(ts.URL + "?s=" + rec.ID)
		if err != nil {
			t.Fatal(err)
		}
		return rec.ID, resp, bufio.NewReader(resp.Body)
	}
	// lines reads until a blank line ends an event or a comment block.
	lines := func(br *bufio.Reader) []string {
		var out []string
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended: %v", err)
			}
			if l = strings.TrimRight(l, "\n"); l == "" {
				return out
			}
			out = append(out, l)
		}
	}
	left, resp, br := open()
	lines(br) // the priming event
	if c := lines(br); len(c) != 1 || c[0] != ":" {
		t.Fatalf("an idle stream's next lines %q, want the keep-alive comment", c)
	}
	msg := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{}}`
	if err := store.Append(ctx, left, json.RawMessage(msg)); err != nil {
		t.Fatal(err)
	}
	for {
		if l := lines(br); len(l) > 1 {
			if l[len(l)-1] != "data: "+msg {
				t.Fatalf("event %q", l)
			}
			break
		}
	}
	// watching waits until the keeper watches n streams (a stream is
	// handed to it just after its priming event is written).
	watching := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Second); keeper.Len() != n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the keeper watches %d streams, want %d", keeper.Len(), n)
			}
		}
	}
	deleted, resp2, br2 := open()
	lines(br2)
	watching(2)
	_ = resp.Body.Close() // the client leaves
	select {
	case id := <-ended:
		if id != left {
			t.Fatalf("ended %s, want the stream whose client left", id)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a client that left was not found within 2 s (keep-alive every 50 ms)")
	}
	if err := store.Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ended:
		if id != deleted {
			t.Fatalf("ended %s, want the deleted session's", id)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("a deleted session's stream did not end")
	}
	_, _ = io.Copy(io.Discard, br2) // it ends: the stream closes
	_ = resp2.Body.Close()
	watching(0)
}
