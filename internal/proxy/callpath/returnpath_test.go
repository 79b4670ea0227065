package callpath

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcp-mux/mcp-mux/internal/panicguard"
)

// noteSink records the notifications it gets; its Request panics.
type noteSink struct {
	Sink
	got []string
}

func (k *noteSink) Notify(method string, params json.RawMessage) {
	k.got = append(k.got, method+" "+string(params))
}

func (k *noteSink) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	panic("sink")
}

// A call's return path gives its Sink the call's progress under the
// caller's own token, drops progress naming any other token, passes other
// notifications as they are, and recovers a panic of the Sink.
func TestReturnPath(t *testing.T) {
	k := &noteSink{}
	_, progress := forwardMeta(json.RawMessage(`{"progressToken":7}`))
	p := &returnPath{sink: k, panics: panicguard.New(hclog.NewNullLogger(), prometheus.NewRegistry()), progress: progress}
	p.Notify("notifications/progress", json.RawMessage(`{"progressToken":"`+progress.upstream+`","progress":1}`))
	p.Notify("notifications/progress", json.RawMessage(`{"progressToken":"mux-p-other","progress":2}`))
	p.Notify("notifications/progress", json.RawMessage(`{"progressToken":7,"progress":3}`))
	p.Notify("notifications/message", json.RawMessage(`{"level":"info","data":"x"}`))
	want := []string{`notifications/progress {"progress":1,"progressToken":7}`, `notifications/message {"level":"info","data":"x"}`}
	if len(k.got) != len(want) || k.got[0] != want[0] || k.got[1] != want[1] {
		t.Fatalf("the sink got %q, want %q", k.got, want)
	}
	if _, err := p.Request(context.Background(), "roots/list", nil); !errors.Is(err, panicguard.ErrPanicked) {
		t.Fatalf("a panicking sink's request: %v", err)
	}
	none := &returnPath{sink: &noteSink{}} // no progress asked for
	none.Notify("notifications/progress", json.RawMessage(`{"progressToken":"","progress":1}`))
	if got := none.sink.(*noteSink).got; len(got) != 0 {
		t.Fatalf("a call without a token got progress %q", got)
	}
}
