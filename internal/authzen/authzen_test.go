package authzen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
)

// A real HTTP endpoint on loopback decides every case; clients close
// their connections, so nothing may be left running.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// pdp is an AuthZEN endpoint whose answer a test sets.
type pdp struct {
	srv    *httptest.Server
	answer atomic.Pointer[func(w http.ResponseWriter, req map[string]any)]
	calls  atomic.Int32
	mu     sync.Mutex
	last   map[string]any
	header http.Header
}

func newPDP(t *testing.T) *pdp {
	p := &pdp{}
	p.set(func(w http.ResponseWriter, _ map[string]any) { _, _ = io.WriteString(w, `{"decision": true}`) })
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		var req map[string]any
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		p.mu.Lock()
		p.last, p.header = req, r.Header.Clone()
		p.mu.Unlock()
		(*p.answer.Load())(w, req)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pdp) set(f func(w http.ResponseWriter, req map[string]any)) { p.answer.Store(&f) }

func (p *pdp) answerWith(body string) {
	p.set(func(w http.ResponseWriter, _ map[string]any) { _, _ = io.WriteString(w, body) })
}

func request() *Request {
	return &Request{
		Subject:   Entity{Type: "user", ID: "alice", Properties: map[string]any{"profile": "finance"}},
		Action:    Action{Name: "tools/call"},
		Resource:  Entity{Type: "mcp_tool", ID: "bank/bank_transfer", Properties: map[string]any{"server": "bank", "name": "bank_transfer"}},
		Context:   map[string]any{"arguments": json.RawMessage(`{"amount":5000,"token":"[redacted]"}`)},
		RequestID: "req-1",
	}
}

func client(t *testing.T, o Options) *Client {
	c := New(o)
	t.Cleanup(c.Close)
	return c
}

// TestDecide: the endpoint allows and denies; it gets the request as
// AuthZEN 1.0 shapes it, with the request id.
func TestDecide(t *testing.T) {
	p := newPDP(t)
	m := NewMetrics()
	c := client(t, Options{URL: p.srv.URL + "/access/v1/evaluation", Metrics: m})
	if d := c.Decide(t.Context(), request()); !d.Allow || d.Outcome != Allow || d.Err != nil || d.Latency <= 0 {
		t.Fatalf("allowed: %+v", d)
	}
	p.mu.Lock()
	got, _ := json.Marshal(p.last)
	rid := p.header.Get("X-Request-ID")
	p.mu.Unlock()
	want := `{"action":{"name":"tools/call"},"context":{"arguments":{"amount":5000,"token":"[redacted]"}},` +
		`"resource":{"id":"bank/bank_transfer","properties":{"name":"bank_transfer","server":"bank"},"type":"mcp_tool"},` +
		`"subject":{"id":"alice","properties":{"profile":"finance"},"type":"user"}}`
	if string(got) != want || rid != "req-1" {
		t.Fatalf("the endpoint got %s (X-Request-ID %q)\nwant %s", got, rid, want)
	}
	p.answerWith(`{"decision": false, "context": {"reason_admin": {"en": "over the limit"}}}`)
	if d := c.Decide(t.Context(), request()); d.Allow || d.Outcome != Deny || d.Err != nil {
		t.Fatalf("denied: %+v", d)
	}
	if n := testutil.ToFloat64(m.decisions.WithLabelValues(Allow)); n != 1 {
		t.Fatalf("allow counted %v times", n)
	}
	if n := testutil.ToFloat64(m.decisions.WithLabelValues(Deny)); n != 1 {
		t.Fatalf("deny counted %v times", n)
	}
}

// TestFailClosed: whenever the endpoint cannot decide — slow, 500, a
// redirect, an answer without a boolean decision, one too large, nobody
// listening — the call is denied (allowed with FailOpen), and the error
// says why without quoting the answer or the URL.
func TestFailClosed(t *testing.T) {
	p := newPDP(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	cases := []struct {
		name, why string
		answer    func(w http.ResponseWriter, req map[string]any)
		url       string
	}{
		{name: "slow", why: "no decision within 50ms", answer: func(w http.ResponseWriter, _ map[string]any) {
			select {
			case <-release:
			case <-time.After(5 * time.Second):
			}
		}},
		{name: "500", why: "answered status 500", answer: func(w http.ResponseWriter, _ map[string]any) {
			http.Error(w, "secret-body", http.StatusInternalServerError)
		}},
		{name: "redirect", why: "answered status 302", answer: func(w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Location", "http://127.0.0.1:1/")
			w.WriteHeader(http.StatusFound)
		}},
		{name: "no decision", why: `without a boolean "decision"`, answer: func(w http.ResponseWriter, _ map[string]any) {
			_, _ = io.WriteString(w, `{"decision": "secret-body"}`)
		}},
		{name: "not JSON", why: `without a boolean "decision"`, answer: func(w http.ResponseWriter, _ map[string]any) {
			_, _ = io.WriteString(w, `secret-body`)
		}},
		{name: "too large", why: fmt.Sprintf("more than %d bytes", MaxResponseBytes), answer: func(w http.ResponseWriter, _ map[string]any) {
			_, _ = io.WriteString(w, `{"decision": true, "context": {"pad": "`+strings.Repeat("x", MaxResponseBytes)+`"}}`)
		}},
		{name: "unreachable", why: "connection refused", url: "http://127.0.0.1:1/access/v1/evaluation?token=secret-token"},
	}
	for _, failOpen := range []bool{false, true} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/fail_open=%v", tc.name, failOpen), func(t *testing.T) {
				if tc.answer != nil {
					p.set(tc.answer)
				}
				u := tc.url
				if u == "" {
					u = p.srv.URL + "/x?token=secret-token"
				}
				c := client(t, Options{URL: u, Timeout: 50 * time.Millisecond, FailOpen: failOpen})
				d := c.Decide(t.Context(), request())
				if d.Allow != failOpen || d.Outcome != Failed || d.Err == nil || !strings.Contains(d.Err.Error(), tc.why) {
					t.Fatalf("%+v: want allow=%v, outcome error saying %q", d, failOpen, tc.why)
				}
				if msg := d.Err.Error(); strings.Contains(msg, "secret") || strings.Contains(msg, "127.0.0.1:1/") {
					t.Fatalf("the error quotes the answer or the URL: %q", msg)
				}
			})
		}
	}
}

// TestCircuitBreaker: BreakAfter failures in a row open the circuit: no
// request is sent for Cooldown and calls get the on_error answer; then
// one call probes, and an answer closes the circuit. A failed probe
// opens it again.
func TestCircuitBreaker(t *testing.T) {
	p := newPDP(t)
	p.set(func(w http.ResponseWriter, _ map[string]any) { w.WriteHeader(http.StatusServiceUnavailable) })
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	m := NewMetrics()
	c := client(t, Options{URL: p.srv.URL, Metrics: m, Now: clock})
	for i := range BreakAfter {
		if d := c.Decide(t.Context(), request()); d.Outcome != Failed || d.Allow {
			t.Fatalf("failure %d: %+v", i+1, d)
		}
	}
	if !c.Open() {
		t.Fatal("the circuit is closed after BreakAfter failures")
	}
	sent := p.calls.Load()
	for range 10 {
		if d := c.Decide(t.Context(), request()); d.Outcome != CircuitOpen || d.Allow || !errors.Is(d.Err, ErrCircuitOpen) {
			t.Fatalf("while open: %+v", d)
		}
	}
	if p.calls.Load() != sent {
		t.Fatalf("%d requests sent while the circuit was open", p.calls.Load()-sent)
	}
	if n := testutil.ToFloat64(m.decisions.WithLabelValues(CircuitOpen)); n != 10 {
		t.Fatalf("circuit_open counted %v times", n)
	}
	// The cooldown ends: a failed probe opens the circuit again.
	now.Add(int64(Cooldown + time.Second))
	if d := c.Decide(t.Context(), request()); d.Outcome != Failed {
		t.Fatalf("the probe: %+v", d)
	}
	if d := c.Decide(t.Context(), request()); d.Outcome != CircuitOpen {
		t.Fatalf("after a failed probe: %+v", d)
	}
	// Next cooldown: the endpoint answers, the circuit closes.
	now.Add(int64(Cooldown + time.Second))
	p.answerWith(`{"decision": true}`)
	for i := range 3 {
		if d := c.Decide(t.Context(), request()); d.Outcome != Allow || !d.Allow {
			t.Fatalf("after recovery, call %d: %+v", i, d)
		}
	}
	if c.Open() {
		t.Fatal("the circuit is still open")
	}
}

// TestCancelledIsNoFailure: a call whose context ends while the endpoint
// thinks is denied without counting against the endpoint.
func TestCancelledIsNoFailure(t *testing.T) {
	p := newPDP(t)
	release := make(chan struct{})
	defer close(release)
	p.set(func(http.ResponseWriter, map[string]any) { <-release })
	c := client(t, Options{URL: p.srv.URL, Timeout: 5 * time.Second})
	for range BreakAfter + 1 {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
		d := c.Decide(ctx, request())
		cancel()
		if d.Allow || d.Outcome != Cancelled {
			t.Fatalf("%+v", d)
		}
	}
	if c.Open() {
		t.Fatal("cancelled calls opened the circuit")
	}
}

// TestSame: a reload with the same settings keeps the client.
func TestSame(t *testing.T) {
	c := New(Options{URL: "http://127.0.0.1:1/x"})
	defer c.Close()
	if !c.Same(Options{URL: "http://127.0.0.1:1/x", Timeout: DefaultTimeout}) || c.Same(Options{URL: "http://127.0.0.1:1/x", FailOpen: true}) ||
		c.Same(Options{URL: "http://127.0.0.1:2/x"}) || (*Client)(nil).Same(Options{}) {
		t.Fatal("Same")
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(prometheus.Collector(NewMetrics().decisions)); err != nil {
		t.Fatal(err)
	}
}
