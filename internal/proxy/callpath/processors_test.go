package callpath

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcp-mux/mcp-mux/internal/audit"
	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/processor"
	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// scriptedProcessor answers each phase as the test says and keeps what
// it was sent.
type scriptedProcessor struct {
	mu      sync.Mutex
	got     []processor.Call
	answers map[string]string // by phase
}

func (p *scriptedProcessor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var c processor.Call
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &c)
	p.mu.Lock()
	p.got = append(p.got, c)
	ans := p.answers[c.Phase]
	p.mu.Unlock()
	_, _ = io.WriteString(w, ans)
}

// TestProcessorsStage: a request-phase deny ends the call before next
// runs, a mutate is what next sees; a response-phase mutate is what the
// caller gets, and only a complete result is shown to the processors;
// each decision is in the record; whatever way the call ends, the stage
// returns what next did when the processors pass.
func TestProcessorsStage(t *testing.T) {
	p := &scriptedProcessor{}
	srv := httptest.NewServer(p)
	defer srv.Close()
	s := testRouter(t, Options{})
	rt := s.rt.Load()
	b := &Backend{Name: "s", Config: &config.Server{}}
	rt.Add(b)
	rt.Config.Processors = []config.Processor{{Name: "pii", URL: secret.Value(srv.URL), Phase: config.PhaseBoth}}
	rt.Processors = NewProcessors(rt, nil, processor.NewMetrics())
	stage := processorsStage(s)
	call := func() *Call {
		c := testCall()
		c.Runtime, c.Backend, c.Route.Server = rt, b, b
		c.Record = (&audit.Auditor{}).Start("tools/call")
		return c
	}

	p.answers = map[string]string{processor.Request: `{"action":"deny","reason":"an e-mail address"}`}
	ran := false
	c := call()
	raw, err := stage.Wrap(func(context.Context, *Call) (json.RawMessage, error) { ran = true; return nil, nil })(t.Context(), c)
	if err != nil || ran || !strings.Contains(string(raw), `processor \"pii\" denied the call: an e-mail address`) || !strings.Contains(string(raw), `"isError":true`) {
		t.Fatalf("deny: ran %v, %s, %v", ran, raw, err)
	}
	if c.Record.Denial != "processor: pii" || len(c.Record.Processors) != 1 || c.Record.Processors[0].Action != processor.Deny {
		t.Errorf("deny record: %+v", c.Record.Record)
	}
	if got := p.got[0]; got.Tool != "t" || got.Server != "s" || got.Caller != s.ids.Of("alice") || string(got.Arguments) != `{"q":1}` {
		t.Errorf("the processor was told %+v", got)
	}

	p.answers = map[string]string{processor.Request: `{"action":"mutate","arguments":{"q":2}}`,
		processor.Response: `{"action":"mutate","result":{"content":[{"type":"text","text":"masked"}]}}`}
	var seen json.RawMessage
	raw, err = stage.Wrap(func(_ context.Context, c *Call) (json.RawMessage, error) {
		seen = c.Args
		return json.RawMessage(`{"content":[{"type":"text","text":"alice@example.com"}]}`), nil
	})(t.Context(), call())
	if err != nil || string(seen) != `{"q":2}` || string(raw) != `{"content":[{"type":"text","text":"masked"}]}` {
		t.Fatalf("mutate: next saw %s, caller got %s, %v", seen, raw, err)
	}
	before := len(p.got)
	raw, _ = stage.Wrap(func(context.Context, *Call) (json.RawMessage, error) {
		return json.RawMessage(`{"resultType":"input_required","inputRequests":{}}`), nil
	})(t.Context(), call())
	if len(p.got) != before+1 || !strings.Contains(string(raw), "input_required") {
		t.Errorf("an input_required answer went to the response phase (%d requests) or changed: %s", len(p.got)-before, raw)
	}

	p.answers = map[string]string{processor.Request: `{"action":"pass"}`, processor.Response: `{"action":"pass"}`}
	for _, e := range endings {
		raw, err := runEnding(t, stage, e, call())
		switch e.name {
		case "success":
			if err != nil || string(raw) != `{"content":[]}` {
				t.Errorf("%s: %s, %v", e.name, raw, err)
			}
		default:
			if err == nil {
				t.Errorf("%s: no error", e.name)
			}
		}
	}

	// A reload with the same settings keeps the client; a changed one is new.
	kept := NewProcessors(rt, rt.Processors, nil)
	if kept.For("s")[0].Client != rt.Processors.For("s")[0].Client {
		t.Error("an unchanged processor got a new client")
	}
	rt.Config.Processors[0].FailOpen = true
	if NewProcessors(rt, kept, nil).For("s")[0].Client == kept.For("s")[0].Client {
		t.Error("a changed processor kept its client")
	}
	kept.Retire(nil)
}
