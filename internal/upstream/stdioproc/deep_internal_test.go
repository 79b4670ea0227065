package stdioproc

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/mcptest"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// A batch line nested too deep is read element by element: a too-deep
// reply fails its call at once, a too-deep message without an id is
// skipped, and the rest of the batch is delivered.
func TestTooDeepBatchLine(t *testing.T) {
	deep := string(mcptest.Deep(wire.MaxDepth + 10))
	line := `[{"jsonrpc":"2.0","id":"mux-1","result":` + deep + `},` +
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":` + deep + `}},` +
		`{"jsonrpc":"2.0","id":"mux-2","result":{"ok":true}},` +
		`{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"m","data":` + deep + `}}]`
	lines := make(chan []byte, 2)
	lines <- []byte(line)
	lines <- []byte(`{"jsonrpc":"2.0","id":"mux-3","result":{}}`)
	close(lines)
	c := &lineConn{lines: lines, stop: func() {}, w: nopWriteCloser{}, log: &rateLog{log: hclog.NewNullLogger()}, closed: make(chan struct{})}
	defer c.Close()
	var got []string
	for {
		m, err := c.Read(context.Background())
		if err != nil {
			break
		}
		r, ok := m.(*jsonrpc.Response)
		if !ok {
			t.Fatalf("read %T %+v", m, m)
		}
		state := "ok"
		if r.Error != nil {
			state = "error"
			if !errors.Is(r.Error, wire.ErrTooDeep) {
				state = "other error"
			}
		}
		got = append(got, jsonID(r.ID)+" "+state)
	}
	want := []string{`"mux-1" error`, `"mux-2" ok`, `7 error`, `"mux-3" ok`}
	if len(got) != len(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("message %d: %s, want %s", i, got[i], want[i])
		}
	}
}

// jsonID is the JSON text of id.
func jsonID(id jsonrpc.ID) string {
	b, _ := json.Marshal(id.Raw())
	return string(b)
}
