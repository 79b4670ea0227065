package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
	"github.com/mcp-mux/mcp-mux/internal/sessionstore"
)

// replicaSet is n muxes on one config sharing their sessions through a
// private redis-server, and an HTTP client that sends each request to the
// next replica in turn, as a round-robin load balancer without stickiness.
type replicaSet struct {
	muxes []*mux
	lb    *http.Client
	next  atomic.Uint64
	hits  []atomic.Int64
	// trips counts each replica's session-store round trips (the TTL
	// refreshes aside).
	trips []atomic.Int64
	redis *mcptest.Redis
}

const testStateKey = "0123456789abcdef0123456789abcdef-replicas"

func startReplicas(t *testing.T, n int, cfg string) *replicaSet {
	t.Helper()
	return startReplicasWith(t, n, cfg, nil)
}

// startReplicasWith is startReplicas with each replica's store options
// passed through edit (nil: unchanged).
func startReplicasWith(t *testing.T, n int, cfg string, edit func(i int, o *sessionstore.Options)) *replicaSet {
	t.Helper()
	rs := &replicaSet{redis: mcptest.StartRedis(t, false), hits: make([]atomic.Int64, n), trips: make([]atomic.Int64, n)}
	for i := range n {
		opts := proxy.Options{StateKey: testStateKey, SessionStore: func(o sessionstore.Options) sessionstore.Store {
			if edit != nil {
				edit(i, &o)
			}
			c := redis.NewClient(&redis.Options{Addr: rs.redis.Addr})
			c.AddHook(tripCounter{&rs.trips[i]})
			return sessionstore.NewRedis(sessionstore.RedisOptions{Options: o, Client: c, KeyPrefix: "test:"})
		}}
		rs.muxes = append(rs.muxes, startMux(t, cfg, opts))
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	rs.lb = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		i := int(rs.next.Add(1)-1) % n
		rs.hits[i].Add(1)
		u, _ := url.Parse(rs.muxes[i].ts.URL)
		r = r.Clone(r.Context())
		r.URL.Host, r.Host = u.Host, u.Host
		return tr.RoundTrip(r)
	})}
	return rs
}

// url is the /mcp endpoint behind the round robin.
func (rs *replicaSet) url() string { return rs.muxes[0].ts.URL + "/mcp" }

// spread returns the requests each replica served.
func (rs *replicaSet) spread() []int64 {
	out := make([]int64, len(rs.hits))
	for i := range rs.hits {
		out[i] = rs.hits[i].Load()
	}
	return out
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// tripCounter counts a client's round trips to Redis, except the
// batched TTL refreshes (PEXPIRE and ZADD only), which are off every
// request's path, and a new pooled connection's handshake.
type tripCounter struct{ n *atomic.Int64 }

func (tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "hello", "client", "auth", "select": // a new connection's handshake
		default:
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			switch c.Name() {
			case "pexpire", "zadd", "hello", "client", "auth", "select":
				continue
			}
			h.n.Add(1)
			break
		}
		return next(ctx, cmds)
	}
}

// connectLB connects a go-sdk client pinned to 2025-11-25 through the round robin.
func (rs *replicaSet) connectLB(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "replicas-client", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: rs.url(), HTTPClient: rs.lb},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// TestReplicasServeOneSession: one go-sdk session whose every request goes
// to the next of three replicas: calls with progress, sampling and
// elicitation (the client's answers land on other replicas than the
// calls), logging after a level set elsewhere, and the spread.
func TestReplicasServeOneSession(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	rs := startReplicas(t, 3, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp"))
	var progress atomic.Int32
	logs := make(chan string, 16)
	cs := rs.connectLB(t, &mcp.ClientOptions{
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			logs <- fmt.Sprint(r.Params.Data)
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "ok"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "yes"}}, nil
		},
	})
	for i := range 6 {
		if got, _ := callText(t, cs, "web_echo", map[string]any{"text": fmt.Sprint(i)}); got != fmt.Sprint(i) {
			t.Fatalf("echo %d: %q", i, got)
		}
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "web_progress", Arguments: map[string]any{"tag": "p"},
		Meta: mcp.Meta{"progressToken": "tok"}})
	if err != nil || res.IsError {
		t.Fatalf("progress: %v %+v", err, res)
	}
	waitLong(t, 10*time.Second, "3 progress notifications", func() bool { return progress.Load() == 3 })
	for range 3 { // each lands on another replica than the client's answer
		if got, _ := callText(t, cs, "web_sample", map[string]any{"tag": "s"}); got != "sampled ok" {
			t.Fatalf("sample: %q", got)
		}
		if got, _ := callText(t, cs, "web_elicit", map[string]any{"tag": "e"}); got != "elicited accept yes" {
			t.Fatalf("elicit: %q", got)
		}
	}
	if err := cs.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		callText(t, cs, "web_log", map[string]any{"tag": "l"})
		select {
		case got := <-logs:
			if got != "log l" {
				t.Fatalf("log message %q", got)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a log message after logging/setLevel (set on another replica) never arrived")
		}
	}
	spread := rs.spread()
	for i, n := range spread {
		if n == 0 {
			t.Fatalf("replica %d served no request: %v", i, spread)
		}
	}
	t.Logf("requests per replica: %v", spread)
}

// rawInit opens a session on base with a raw initialize and returns its id.
func rawInit(t *testing.T, c *http.Client, base string, caps string) string {
	t.Helper()
	resp := rawDo(t, c, base, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+caps+`,"clientInfo":{"name":"raw","version":"1"}}}`)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: HTTP %d", resp.StatusCode)
	}
	rawDo(t, c, base, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	return sid
}

func rawDo(t *testing.T, c *http.Client, base, sid, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/mcp", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if sid != "" {
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestReplicasStoreRoundTrips: a call on a session this replica has
// already seen costs no session-store round trip; the first request that
// reaches a replica that has not costs one (the record's read).
func TestReplicasStoreRoundTrips(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	rs := startReplicas(t, 2, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp"))
	a, b := rs.muxes[0].ts.URL, rs.muxes[1].ts.URL
	sid := rawInit(t, testHTTP, a, `{}`)
	call := func(base string, i int) {
		t.Helper()
		resp := rawDo(t, testHTTP, base, sid, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"web_echo","arguments":{"text":"x"}}}`, 10+i))
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call on %s: HTTP %d", base, resp.StatusCode)
		}
		if rep := readReplies(t, resp); len(rep) != 1 || rep[0].Error != nil {
			t.Fatalf("call: %+v", rep)
		}
	}
	call(a, 0) // warm: the first call opens the upstream session
	before := rs.trips[0].Load()
	for i := range 50 {
		call(a, 1+i)
	}
	if n := rs.trips[0].Load() - before; n != 0 {
		t.Fatalf("50 calls on the replica that created the session: %d session-store round trips, want 0", n)
	}
	before = rs.trips[1].Load()
	call(b, 100)
	if n := rs.trips[1].Load() - before; n != 1 {
		t.Fatalf("the first call on another replica: %d session-store round trips, want 1", n)
	}
	before = rs.trips[1].Load()
	for i := range 50 {
		call(b, 200+i)
	}
	if n := rs.trips[1].Load() - before; n != 0 {
		t.Fatalf("50 more calls there: %d round trips, want 0", n)
	}
}

// TestReplicasRefuseOtherCallersAndEndEverywhere: a session is its
// caller's on every replica (403 for another), and a DELETE on one replica
// ends it on all (404 everywhere after).
func TestReplicasRefuseOtherCallersAndEndEverywhere(t *testing.T) {
	cfg := `{"mcpServers": {}, "inbound": {"auth": {"mode": "api_keys", "keys": {"alice": "key-alice-0123456789", "bob": "key-bob-0123456789"}}}}`
	rs := startReplicas(t, 2, cfg)
	as := func(key string) *http.Client {
		return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+key)
			return testHTTP.Transport.RoundTrip(r)
		})}
	}
	alice, bob := as("key-alice-0123456789"), as("key-bob-0123456789")
	sid := rawInit(t, alice, rs.muxes[0].ts.URL, `{}`)
	ping := `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	for _, m := range rs.muxes {
		resp := rawDo(t, bob, m.ts.URL, sid, ping)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("bob using alice's session: HTTP %d, want 403", resp.StatusCode)
		}
		resp = rawDo(t, alice, m.ts.URL, sid, ping)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("alice: HTTP %d", resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, rs.muxes[1].ts.URL+"/mcp", nil)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := alice.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", resp.StatusCode)
	}
	// The other replica learns of the end from the change notice (Redis
	// pub/sub): at once on the replica that ended it, within that
	// notice's delivery elsewhere.
	for i, m := range rs.muxes {
		waitLong(t, 5*time.Second, fmt.Sprintf("replica %d to answer 404 after DELETE", i), func() bool {
			resp := rawDo(t, alice, m.ts.URL, sid, ping)
			resp.Body.Close()
			return resp.StatusCode == http.StatusNotFound
		})
	}
}

// eventReader reads the events of one GET stream.
type eventReader struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func openEvents(t *testing.T, base, sid, lastEventID string) *eventReader {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/mcp", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", sid)
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := testHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		t.Fatalf("GET stream: HTTP %d", resp.StatusCode)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &eventReader{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next event's id and data (data "" for a priming event).
func (s *eventReader) next(t *testing.T) (id, data string) {
	t.Helper()
	done := make(chan struct{})
	timer := time.AfterFunc(10*time.Second, func() { s.resp.Body.Close(); close(done) })
	defer timer.Stop()
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if id != "" || data != "" {
				return id, data
			}
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
	select {
	case <-done:
		t.Fatal("no event within 10s")
	default:
		t.Fatalf("the stream ended: %v", s.sc.Err())
	}
	return "", ""
}

// TestReplicasStreamFollowsTheLog: what one replica sends a session
// outside a request (a tool_search promotion's list_changed, an upstream's
// resource update) reaches its GET stream on another; a stream resumed
// with Last-Event-ID on a third replica replays what it missed; a
// resources/subscribe made on a replica that does not hold the stream is
// carried out by the one that does.
func TestReplicasStreamFollowsTheLog(t *testing.T) {
	w := newWatchServer(t, "watch", "res://watched", false)
	rs := startReplicas(t, 3, fmt.Sprintf(`{"mcpServers": {"watch": {"type": "http", "url": %q}}}`, w.url))
	a, b, c := rs.muxes[0].ts.URL, rs.muxes[1].ts.URL, rs.muxes[2].ts.URL
	sid := rawInit(t, testHTTP, a, `{}`)
	stream := openEvents(t, b, sid, "")
	prime, data := stream.next(t)
	if data != "" || prime == "" {
		t.Fatalf("first event: id %q data %q, want a priming event", prime, data)
	}
	// Subscribed on C while B holds the stream: B subscribes upstream.
	resp := rawDo(t, testHTTP, c, sid, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"res://watched"}}`)
	if rep := readReplies(t, resp); len(rep) != 1 || rep[0].Error != nil {
		t.Fatalf("subscribe: %+v", rep)
	}
	resp.Body.Close()
	if w.held.Load() != 1 {
		t.Fatal("the upstream holds no subscription after resources/subscribe returned")
	}
	_ = w.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "res://watched"})
	id1, data := stream.next(t)
	if !strings.Contains(data, `"notifications/resources/updated"`) || !strings.Contains(data, "res://watched") {
		t.Fatalf("event %q: %s", id1, data)
	}
	// The stream goes away; meanwhile another update is logged.
	stream.resp.Body.Close()
	_ = w.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: "res://watched"})
	waitLong(t, 10*time.Second, "the second update to be logged", func() bool {
		n, _ := rs.redis.Do("XLEN", sessionstore.SessionKey("test:", sid)+":log")
		return n == "2"
	})
	resumed := openEvents(t, c, sid, id1)
	if _, data := resumed.next(t); data != "" {
		t.Fatalf("resumed stream's first event %q, want its priming event", data)
	}
	if _, data := resumed.next(t); !strings.Contains(data, `"notifications/resources/updated"`) {
		t.Fatalf("replayed: %s", data)
	}
}

// TestReplicasForwardParkedRetry: a 2026-07-28 client's call to a legacy
// upstream that asks for input parks on the replica that started it; the
// retry reaches another replica, which sends it to the first, and the
// answer comes back through it.
func TestReplicasForwardParkedRetry(t *testing.T) {
	up := mcptest.ServeHTTP(t, mcptest.NewServer("web"))
	rs := startReplicas(t, 2, fmt.Sprintf(`{"mcpServers": {"web": {"type": "http", "url": %q}}}`, up.URL+"/mcp"))
	const caps = `{"elicitation":{}}`
	_, r := modernCall(t, rs.muxes[0].ts.URL+"/mcp", nil, caps, "tools/call", "web_elicit", `"name":"web_elicit","arguments":{"tag":"r"}`)
	reqs, state := inputRequiredOf(t, r)
	var key string
	for k := range reqs {
		key = k
	}
	answer := `"inputResponses":{"` + key + `":{"action":"accept","content":{"answer":"yes"}}}`
	_, r = modernCall(t, rs.muxes[1].ts.URL+"/mcp", nil, caps, "tools/call", "web_elicit",
		`"name":"web_elicit","arguments":{"tag":"r"},`+answer+`,"requestState":`+mustQuote(state))
	if r.Error != nil || !strings.Contains(string(r.Result), "elicited accept yes") {
		t.Fatalf("the retry on the other replica: %s %+v", r.Result, r.Error)
	}
}

// TestReplicasSeePromotionsAtOnce: a tool_search promotion answered by
// one replica is in the next tools/list and call on another, even before
// the change notice reaches it (here it never does: the other replicas
// hear of no change, and must read the record).
func TestReplicasSeePromotionsAtOnce(t *testing.T) {
	rs := startReplicasWith(t, 2, searchConfig(t, ""), func(i int, o *sessionstore.Options) {
		if i == 1 {
			o.OnChange = func(sessionstore.Change) {} // deaf to change notices
		}
	})
	a, b := rs.muxes[0].ts.URL, rs.muxes[1].ts.URL
	sid := rawInit(t, testHTTP, a, `{}`)
	listOn := func(base string) string {
		t.Helper()
		resp := rawDo(t, testHTTP, base, sid, `{"jsonrpc":"2.0","id":5,"method":"tools/list"}`)
		defer resp.Body.Close()
		rep := readReplies(t, resp)
		if len(rep) != 1 || rep[0].Error != nil {
			t.Fatalf("tools/list: %+v", rep)
		}
		return string(rep[0].Result)
	}
	if l := listOn(b); strings.Contains(l, "pg_query") { // b has seen the session now
		t.Fatalf("listed before any search: %s", l)
	}
	resp := rawDo(t, testHTTP, a, sid, `{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"tool_search","arguments":{"query":"select:pg_query"}}}`)
	resp.Body.Close()
	if l := listOn(b); !strings.Contains(l, `"pg_query"`) {
		t.Fatalf("tools/list on the other replica after the promotion: %s", l)
	}
	resp = rawDo(t, testHTTP, b, sid, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"pg_query","arguments":{}}}`)
	defer resp.Body.Close()
	if rep := readReplies(t, resp); len(rep) != 1 || strings.Contains(string(rep[0].Result), "deferred") {
		t.Fatalf("calling the promoted tool on the other replica: %+v", rep)
	}
}
