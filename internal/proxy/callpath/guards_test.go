package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/config"
	"github.com/mcp-mux/mcp-mux/internal/seal"
	"github.com/mcp-mux/mcp-mux/internal/spill"
)

// downSpill is a spill store that fails every put.
type downSpill struct{ spill.Store }

func (downSpill) Put(context.Context, string, string, []byte, time.Duration) error {
	return errors.New("connection refused")
}

// A result that cannot be spilled — the store fails, or it is over
// spill.MaxResult — is truncated instead, the marker saying why, with no
// link; one within the budget passes untouched.
func TestGuardsStageSpillFallback(t *testing.T) {
	big := strings.Repeat("x", spill.MaxResult+1)
	for name, tc := range map[string]struct {
		store spill.Store
		text  string
		note  string
	}{
		"store down": {downSpill{}, strings.Repeat("y", 5000), "; not kept: the spill store failed]"},
		"too large":  {spill.NewLocal(nil), big, "; not kept: over 8388608 bytes]"},
	} {
		t.Run(name, func(t *testing.T) {
			s := testRouter(t, Options{Spill: tc.store})
			rt := NewRuntime(&config.Config{ResultGuards: &config.ResultGuards{MaxChars: 1000, OnExceed: config.OnExceedSpill, SpillTTL: time.Minute}})
			rt.States = seal.New("guards-test-key-0123456789abcdef")
			c := testCall()
			c.Runtime = rt
			raw, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": tc.text}}})
			out, err := guardsStage(s).Wrap(func(context.Context, *Call) (json.RawMessage, error) { return raw, nil })(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				Content []struct{ Type, Text string }
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res.Content) != 2 {
				t.Fatalf("result %.300s: %v", out, err)
			}
			if len(res.Content[0].Text) != 1000 || !strings.HasSuffix(res.Content[1].Text, tc.note) || strings.Contains(string(out), "resource_link") {
				t.Errorf("head of %d, marker %q, want 1000 and a marker ending %q, no link", len(res.Content[0].Text), res.Content[1].Text, tc.note)
			}
			if c.Record.ResultGuard == nil || c.Record.ResultGuard.Action != "truncated" || c.Record.ResultGuard.Kept != 1000 {
				t.Errorf("audit record notes %+v", c.Record.ResultGuard)
			}
			small := json.RawMessage(`{"content":[{"type":"text","text":"ok"}]}`)
			if out, _ := guardsStage(s).Wrap(func(context.Context, *Call) (json.RawMessage, error) { return small, nil })(context.Background(), c); string(out) != string(small) {
				t.Errorf("a result within the budget became %s", out)
			}
		})
	}
}
