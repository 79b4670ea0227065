package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/proxy"
)

// sharesMux is a mux whose callers name themselves (trusted_header, X-User)
// with inbound settings extra; its upstream alpha (mcptest) elicits.
func sharesMux(t *testing.T, inbound string) *mux {
	t.Helper()
	return modernMux(t, `, "inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User"`+inbound+`}`)
}

func as(user string) map[string]string { return map[string]string{"X-User": user} }

// openRawSession initializes a legacy session as user and returns the HTTP
// status, the session id and the body.
func openRawSession(t *testing.T, url, user string) (int, string, string) {
	t.Helper()
	status, h, body := rawRequest(t, http.MethodPost, url, as(user), initializeBody)
	return status, h.Get("Mcp-Session-Id"), body
}

// One caller who opens sessions up to its share (by default a quarter of
// inbound.max_sessions) is refused the next with HTTP 503 naming the share,
// while another caller still opens its own; a closed session frees its
// place in the share.
func TestSessionShareKeepsOthersIn(t *testing.T) {
	m := sharesMux(t, `, "max_sessions": 8`)
	url := m.ts.URL + "/mcp"
	var alice []string
	for i := range 2 {
		status, sid, body := openRawSession(t, url, "alice")
		if status != http.StatusOK || sid == "" {
			t.Fatalf("alice's session %d: HTTP %d %s", i, status, body)
		}
		alice = append(alice, sid)
	}
	status, _, body := openRawSession(t, url, "alice")
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "inbound.max_sessions_per_user") || !strings.Contains(body, "-32000") {
		t.Fatalf("alice's third session: HTTP %d %s, want 503 naming inbound.max_sessions_per_user", status, body)
	}
	for i := range 2 {
		if status, sid, body := openRawSession(t, url, "bob"); status != http.StatusOK || sid == "" {
			t.Fatalf("bob's session %d while alice is at her share: HTTP %d %s", i, status, body)
		}
	}
	hdr := as("alice")
	hdr["Mcp-Session-Id"] = alice[0]
	if status, _, body := rawRequest(t, http.MethodDelete, url, hdr, ""); status/100 != 2 {
		t.Fatalf("DELETE: HTTP %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, body := openRawSession(t, url, "alice")
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed session never freed its place in alice's share: HTTP %d %s", status, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Under auth mode none there is one caller, who gets the whole cap.
func TestSessionShareWholeCapWithoutAuth(t *testing.T) {
	m := modernMux(t, `, "inbound": {"max_sessions": 3, "max_sessions_per_user": 1}`)
	for i := range 3 {
		if status, sid, body := openRawSession(t, m.ts.URL+"/mcp", "ignored"); status != http.StatusOK || sid == "" {
			t.Fatalf("session %d: HTTP %d %s", i, status, body)
		}
	}
	if status, _, body := openRawSession(t, m.ts.URL+"/mcp", "ignored"); status != http.StatusServiceUnavailable || !strings.Contains(body, "(inbound.max_sessions)") {
		t.Fatalf("fourth session: HTTP %d %s, want 503 naming inbound.max_sessions", status, body)
	}
}

// Calls that park on a legacy upstream's elicitation count against their
// caller's share of inbound.max_parked_calls: past it the caller is refused
// (-32000 naming the share) while another caller still parks; answering a
// parked call frees its place.
func TestParkedShareKeepsOthersIn(t *testing.T) {
	// A legacy stdio upstream that elicits: calls still waiting for input
	// when the test ends end with its process.
	cmd, args, env := mcptest.ScriptedStdio(mcptest.AskClient)
	c, _ := json.Marshal(cmd)
	a, _ := json.Marshal(args)
	e, _ := json.Marshal(env)
	m := startMux(t, fmt.Sprintf(`{"mcpServers": {"alpha": {"type": "stdio", "command": %s, "args": %s, "env": %s}},
		"inbound": {"auth": {"mode": "trusted_header"}, "user_header": "X-User", "max_parked_calls_per_user": 2}}`, c, a, e), proxy.Options{})
	url := m.ts.URL + "/mcp"
	const caps = `{"elicitation":{"form":{}}}`
	call := `"name":"alpha_ask","arguments":{"method":"elicitation/create","params":` +
		mustQuote(`{"message":"name?","requestedSchema":{"type":"object","properties":{}}}`) + `}`
	// The scripted server serves one call at a time: each call has a
	// thread of its own, so an upstream session (process) of its own.
	threads := 0
	park := func(user string) rpcReply {
		threads++
		hdr := as(user)
		hdr["X-Mux-Thread-Id"] = fmt.Sprint("t", threads)
		_, r := modernCall(t, url, hdr, caps, "tools/call", "alpha_ask", call)
		return r
	}
	var key, state string
	for range 2 {
		reqs, st := inputRequiredOf(t, park("alice"))
		for k := range reqs {
			key, state = k, st
		}
	}
	if r := park("alice"); r.Error == nil || r.Error.Code != -32000 || !strings.Contains(r.Error.Message, "inbound.max_parked_calls_per_user") {
		t.Fatalf("alice's third parked call: %s %+v, want -32000 naming inbound.max_parked_calls_per_user", r.Result, r.Error)
	}
	for range 2 {
		inputRequiredOf(t, park("bob"))
	}
	hdr := as("alice")
	hdr["X-Mux-Thread-Id"] = "t2"
	_, r := modernCall(t, url, hdr, caps, "tools/call", "alpha_ask",
		call+`,"inputResponses":{`+mustQuote(key)+`:{"action":"accept","content":{}}},"requestState":`+mustQuote(state))
	if r.Error != nil || !strings.Contains(string(r.Result), "accept") {
		t.Fatalf("alice's answer: %s %+v", r.Result, r.Error)
	}
	inputRequiredOf(t, park("alice"))
}

// Open subscriptions/listen streams count against their caller's share of
// inbound.max_sessions (by default a quarter): past it the caller is
// refused naming the share, another caller still listens, and a closed
// stream frees its place.
func TestListenShareKeepsOthersIn(t *testing.T) {
	m := sharesMux(t, `, "max_sessions": 8`)
	url := m.ts.URL + "/mcp"
	body := `{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{` + modernMeta("{}") +
		`,"notifications":{"toolsListChanged":true}}}`
	listen := func(ctx context.Context, user string) string {
		hdr := modernHeaders("subscriptions/listen", "")
		hdr["X-User"] = user
		_, first := firstEvent(t, ctx, url, hdr, body)
		return first
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	first, closeFirst := context.WithCancel(ctx)
	for i, c := range []context.Context{first, ctx} {
		if got := listen(c, "alice"); !strings.Contains(got, "notifications/subscriptions/acknowledged") {
			t.Fatalf("alice's listen %d: %s", i, got)
		}
	}
	if got := listen(ctx, "alice"); !strings.Contains(got, "inbound.max_listens_per_user") || !strings.Contains(got, "-32000") {
		t.Fatalf("alice's third listen: %s, want -32000 naming inbound.max_listens_per_user", got)
	}
	for i := range 2 {
		if got := listen(ctx, "bob"); !strings.Contains(got, "notifications/subscriptions/acknowledged") {
			t.Fatalf("bob's listen %d while alice is at her share: %s", i, got)
		}
	}
	closeFirst()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, stop := context.WithCancel(ctx)
		got := listen(c, "alice")
		stop()
		if strings.Contains(got, "acknowledged") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a closed listen never freed its place in alice's share: %s", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// firstEvent posts body and returns the status and the first JSON-RPC
// message of the response, an event stream or a JSON body; the response
// stays open until ctx ends.
func firstEvent(t *testing.T, ctx context.Context, url string, hdr map[string]string, body string) (int, string) {
	t.Helper()
	resp, err := testHTTP.Do(mcpRequest(t, ctx, http.MethodPost, url, hdr, body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b := make([]byte, 4096)
		n, _ := resp.Body.Read(b)
		return resp.StatusCode, string(b[:n])
	}
	return resp.StatusCode, fmt.Sprint(sseMessage(t, resp))
}

func sseMessage(t *testing.T, resp *http.Response) string {
	t.Helper()
	s := &sseReader{sc: bufio.NewScanner(resp.Body), body: resp.Body}
	b, _ := json.Marshal(s.next(t))
	return string(b)
}
