package processor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/processor"
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

// scripted is a processor answering what answer returns for each request
// it decodes; it keeps the requests.
type scripted struct {
	mu     sync.Mutex
	calls  []processor.Call
	answer func(c processor.Call) (int, string)
}

func (p *scripted) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var c processor.Call
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &c); err != nil || r.Header.Get("Content-Type") != "application/json" {
		http.Error(w, "bad request", 400)
		return
	}
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	code, ans := p.answer(c)
	w.WriteHeader(code)
	_, _ = io.WriteString(w, ans)
}

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func client(t *testing.T, o processor.Options) *processor.Client {
	t.Helper()
	c := processor.New(o)
	t.Cleanup(c.Close)
	return c
}

var toolCall = processor.Call{Phase: processor.Request, Method: "tools/call", Caller: "hmac:abc", Server: "s", Tool: "t", Arguments: json.RawMessage(`{"q":"x"}`)}

// TestProcessAnswers: each answer of the contract, and each answer that
// breaks it, becomes the decision it should, counted once by processor,
// phase and action.
func TestProcessAnswers(t *testing.T) {
	okResult := `{"content":[{"type":"text","text":"clean"}],"isError":false}`
	cases := []struct {
		name, phase, answer string
		code                int
		action, reason      string
		payload             string
	}{
		{"pass", processor.Request, `{"action":"pass"}`, 200, processor.Pass, "", ""},
		{"deny with reason", processor.Request, `{"action":"deny","reason":"PII: e-mail\u0000\u001b[31m found\u202e"}`, 200, processor.Deny, "PII: e-mail[31m found", ""},
		{"long reason clipped", processor.Request, `{"action":"deny","reason":"` + strings.Repeat("é", 400) + `"}`, 200, processor.Deny, strings.Repeat("é", processor.MaxReason/2), ""},
		{"mutate arguments", processor.Request, `{"action":"mutate","arguments":{"q":"[redacted]"}}`, 200, processor.Mutate, "", `{"q":"[redacted]"}`},
		{"mutate result", processor.Response, `{"action":"mutate","result":` + okResult + `}`, 200, processor.Mutate, "", okResult},
		{"204 no body", processor.Request, ``, 204, processor.ErrorDenied, "answered something other than", ""},
		{"500", processor.Request, `{"action":"pass"}`, 500, processor.ErrorDenied, "answered status 500", ""},
		{"redirect", processor.Request, ``, 302, processor.ErrorDenied, "answered status 302", ""},
		{"not JSON", processor.Request, `pass`, 200, processor.ErrorDenied, "answered something other than", ""},
		{"unknown member", processor.Request, `{"action":"pass","verdict":"ok"}`, 200, processor.ErrorDenied, "answered something other than", ""},
		{"trailing data", processor.Request, `{"action":"pass"} {"action":"deny"}`, 200, processor.ErrorDenied, "answered something other than", ""},
		{"unknown action", processor.Request, `{"action":"allow"}`, 200, processor.ErrorDenied, "an action other than", ""},
		{"pass with payload", processor.Request, `{"action":"pass","arguments":{}}`, 200, processor.ErrorDenied, "with a payload", ""},
		{"mutate without payload", processor.Request, `{"action":"mutate"}`, 200, processor.ErrorDenied, "without \"arguments\"", ""},
		{"mutate arguments not an object", processor.Request, `{"action":"mutate","arguments":[1]}`, 200, processor.ErrorDenied, "not a JSON object", ""},
		{"mutate result in the request phase", processor.Request, `{"action":"mutate","result":` + okResult + `}`, 200, processor.ErrorDenied, "without \"arguments\"", ""},
		{"non-result", processor.Response, `{"action":"mutate","result":{"text":"hi"}}`, 200, processor.ErrorDenied, "not a valid CallToolResult", ""},
		{"bad block", processor.Response, `{"action":"mutate","result":{"content":[{"type":"image","data":"AA=="}]}}`, 200, processor.ErrorDenied, "mimeType", ""},
		{"too deep", processor.Request, `{"action":"mutate","arguments":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`, 200, processor.ErrorDenied, "nested deeper", ""},
	}
	m := processor.NewMetrics()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &scripted{answer: func(processor.Call) (int, string) { return tc.code, tc.answer }}
			srv := serve(t, p)
			c := client(t, processor.Options{Name: "pii", URL: srv.URL, Metrics: m})
			call := toolCall
			call.Phase = tc.phase
			before := testutil.ToFloat64(m.Decisions("pii", tc.phase, tc.action))
			d := c.Process(t.Context(), &call)
			if d.Action != tc.action {
				t.Fatalf("action %q (err %v), want %q", d.Action, d.Err, tc.action)
			}
			if !strings.Contains(d.Reason, tc.reason) || (tc.action == processor.Deny && d.Reason != tc.reason) {
				t.Errorf("reason %q, want %q", d.Reason, tc.reason)
			}
			if string(d.Payload) != tc.payload {
				t.Errorf("payload %s, want %s", d.Payload, tc.payload)
			}
			if got := testutil.ToFloat64(m.Decisions("pii", tc.phase, tc.action)) - before; got != 1 {
				t.Errorf("counted %v decisions, want 1", got)
			}
			if len(p.calls) == 1 && (p.calls[0].Caller != "hmac:abc" || p.calls[0].Tool != "t" || string(p.calls[0].Arguments) != `{"q":"x"}`) {
				t.Errorf("the processor got %+v", p.calls[0])
			}
		})
	}
}

// TestFailOpen: on_error allow lets a call through when the processor
// fails, and says so.
func TestFailOpen(t *testing.T) {
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	d := client(t, processor.Options{Name: "p", URL: srv.URL, FailOpen: true}).Process(t.Context(), &toolCall)
	if d.Action != processor.ErrorAllowed || d.Err == nil {
		t.Fatalf("decision %+v, want error_allowed with its error", d)
	}
}

// A processor that cannot be reached is named by what went wrong, never
// by its host or address (the reason reaches the caller's tool error).
func TestUnreachableNamesNoAddress(t *testing.T) {
	srv := serve(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	url := srv.URL
	srv.Close() // nothing listens there now
	d := client(t, processor.Options{Name: "p", URL: url}).Process(t.Context(), &toolCall)
	if d.Action != processor.ErrorDenied || d.Reason != "could not be reached" || strings.Contains(d.Reason, "127.0.0.1") {
		t.Fatalf("decision %+v, want error_denied with reason \"could not be reached\"", d)
	}
}

// countingBody counts the bytes read through it.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingTransport struct {
	http.RoundTripper
	n atomic.Int64
}

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(r)
	if err == nil {
		resp.Body = countingBody{resp.Body, &t.n}
	}
	return resp, err
}

// TestHugeAnswer: a processor that streams a 1 GB answer costs the mux at
// most max_body_bytes+1 bytes read, and is an error.
func TestHugeAnswer(t *testing.T) {
	var written atomic.Int64
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(`{"action":"pass","reason":"` + strings.Repeat("x", 64<<10))
		for written.Load() < 1<<30 && r.Context().Err() == nil {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	tr := &countingTransport{RoundTripper: http.DefaultTransport.(*http.Transport).Clone()}
	const max = 256 << 10
	d := client(t, processor.Options{Name: "big", URL: srv.URL, MaxBody: max, Transport: tr}).Process(t.Context(), &toolCall)
	if d.Action != processor.ErrorDenied || !strings.Contains(d.Reason, "more than 262144 bytes") {
		t.Fatalf("decision %+v, want error_denied for the size", d)
	}
	if n := tr.n.Load(); n > max+1 {
		t.Errorf("read %d bytes of the answer, want at most %d", n, max+1)
	}
	tr.RoundTripper.(*http.Transport).CloseIdleConnections()
}

// TestTimeouts: a processor that never answers is an error once the
// timeout passes, and a cancelled call is not a processor's failure.
func TestTimeouts(t *testing.T) {
	var got atomic.Int32
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server sees the client leave once the body is read
		got.Add(1)
		<-r.Context().Done()
	}))
	m := processor.NewMetrics()
	c := client(t, processor.Options{Name: "slow", URL: srv.URL, Timeout: 100 * time.Millisecond, Metrics: m})
	d := c.Process(t.Context(), &toolCall)
	if d.Action != processor.ErrorDenied || !strings.Contains(d.Reason, "no answer within 100ms") {
		t.Fatalf("never answering: %+v", d)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan processor.Decision, 1)
	long := client(t, processor.Options{Name: "slow", URL: srv.URL, Timeout: 30 * time.Second, Metrics: m})
	go func() { done <- long.Process(ctx, &toolCall) }()
	for got.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if d := <-done; d.Action != processor.Cancelled {
		t.Errorf("the cancelled call: %+v, want cancelled", d)
	}
	if n := testutil.ToFloat64(m.Decisions("slow", processor.Request, processor.ErrorDenied)); n != 1 {
		t.Errorf("%v error_denied decisions, want 1 (a cancelled call is not counted)", n)
	}
}

// TestConcurrencyLimit: a processor never has more than max_concurrent
// requests of one Client in flight; the others wait for a slot.
func TestConcurrencyLimit(t *testing.T) {
	release := make(chan struct{})
	var inflight, peak, got atomic.Int32
	srv := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		defer inflight.Add(-1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		got.Add(1)
		<-release
		_, _ = io.WriteString(w, `{"action":"pass"}`)
	}))
	c := client(t, processor.Options{Name: "two", URL: srv.URL, Timeout: 30 * time.Second, MaxConcurrent: 2})
	var wg sync.WaitGroup
	actions := make(chan string, 6)
	for range 6 {
		wg.Go(func() { actions <- c.Process(t.Context(), &toolCall).Action })
	}
	for got.Load() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(actions)
	for a := range actions {
		if a != processor.Pass {
			t.Errorf("action %q, want pass", a)
		}
	}
	if p := peak.Load(); p != 2 {
		t.Errorf("%d requests in flight at once, want 2 (max_concurrent)", p)
	}
}

// TestListRun: processors run in order, each seeing the one before's
// mutation; a deny ends the run; tools globs and phases select who is
// asked.
func TestListRun(t *testing.T) {
	mk := func(name string, answer func(processor.Call) (int, string)) (*scripted, *processor.Client) {
		p := &scripted{answer: answer}
		return p, client(t, processor.Options{Name: name, URL: serve(t, p).URL})
	}
	p1, c1 := mk("upper", func(processor.Call) (int, string) { return 200, `{"action":"mutate","arguments":{"q":"X"}}` })
	p2, c2 := mk("deny-x", func(c processor.Call) (int, string) {
		if string(c.Arguments) == `{"q":"X"}` {
			return 200, `{"action":"deny","reason":"no X"}`
		}
		return 200, `{"action":"pass"}`
	})
	p3, c3 := mk("never", func(processor.Call) (int, string) { return 200, `{"action":"pass"}` })
	l := processor.List{
		{Client: c1, Request: true, Tools: []string{"s_*"}},
		{Client: c2, Request: true, Response: true},
		{Client: c3, Request: true},
	}
	out := l.Run(t.Context(), "s_t", toolCall)
	if out.DeniedBy != "deny-x" || out.Reason != "no X" || len(out.Notes) != 2 || len(p3.calls) != 0 {
		t.Fatalf("outcome %+v; the third processor got %d calls", out, len(p3.calls))
	}
	out = l.Run(t.Context(), "other", toolCall)
	if out.DeniedBy != "" || out.Mutated || len(p1.calls) != 1 || len(p2.calls) != 2 || len(p3.calls) != 1 {
		t.Fatalf("a tool the glob leaves out: %+v, calls %d %d %d", out, len(p1.calls), len(p2.calls), len(p3.calls))
	}
	if l.Has(processor.Response, "x") != true || (processor.List{{Client: c1, Request: true}}).Has(processor.Response, "x") {
		t.Error("Has does not follow the phases")
	}
}

// FuzzDecodeAnswer: any answer decodes or is refused without panicking,
// an error quotes nothing of it (the seeds carry a canary), and a decoded
// one keeps the contract.
func FuzzDecodeAnswer(f *testing.F) {
	for _, s := range []string{`{"action":"pass"}`, `{"action":"deny","reason":"x\u0000"}`, `{"action":"mutate","arguments":{"a":1}}`,
		`{"action":"mutate","result":{"content":[{"type":"text","text":"a"},{"type":"resource","resource":{"uri":"x","blob":"AA"}}]}}`,
		`{"action":"mutate","result":{"content":[{"type":"resource_link","uri":"u","name":"n"}],"structuredContent":{},"_meta":{}}}`,
		`[[[[`, `{"action":"mutate","arguments":null}`, `{}`, ``,
		`{"action":"mutate","result":{"content":[{"type":"CANARY","text":"a"}]}}`, `{"action":"mutate","result":{"CANARY":1,"content":[]}}`,
		`{"action":"CANARY"}`, `{"CANARY":"pass"}`, `{"action":"deny","reason":"CANARY"} CANARY`} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, request bool) {
		phase := processor.Response
		if request {
			phase = processor.Request
		}
		a, err := processor.DecodeAnswer(data, phase)
		if err != nil {
			if strings.Contains(err.Error(), "CANARY") {
				t.Errorf("the error quotes the answer: %v", err)
			}
			return
		}
		if len(a.Reason) > processor.MaxReason {
			t.Errorf("reason of %d bytes", len(a.Reason))
		}
		switch {
		case a.Action == processor.Mutate && request && !json.Valid(a.Arguments):
			t.Errorf("mutated arguments %q", a.Arguments)
		case a.Action == processor.Mutate && !request && processor.CheckResult(a.Result) != nil:
			t.Errorf("mutated result %q", a.Result)
		case a.Action != processor.Pass && a.Action != processor.Deny && a.Action != processor.Mutate:
			t.Errorf("action %q", a.Action)
		}
	})
}
