package stdioproc

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FuzzStdioFraming feeds arbitrary stdout to the stdio framing: it never
// panics or stops early, and every line that is a JSON-RPC message is
// delivered, in order, whatever lines surround it.
func FuzzStdioFraming(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{\"next\":\n"))
	f.Add([]byte("banner\n[{\"jsonrpc\":\"2.0\",\"method\":\"m\"}]\r\n{\n[]\n"))
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-1,\"message\":\"e\"}}"))
	good := []byte(`{"jsonrpc":"2.0","method":"notifications/message","params":{}}`)
	f.Fuzz(func(t *testing.T, junk []byte) {
		in := bytes.Join([][]byte{junk, good, junk, good}, []byte("\n"))
		lines := make(chan []byte)
		stop := make(chan struct{})
		go readLines(bytes.NewReader(in), lines, stop, &rateLog{log: hclog.NewNullLogger()})
		c := &lineConn{lines: lines, stop: func() { close(stop) }, w: nopWriteCloser{}, log: &rateLog{log: hclog.NewNullLogger()}, closed: make(chan struct{})}
		defer c.Close()
		want := 0 // notifications read back
		for {
			m, err := c.Read(context.Background())
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if r, ok := m.(*jsonrpc.Request); ok && r.Method == "notifications/message" {
				want++
			}
		}
		if want < 2 {
			t.Fatalf("%d of the 2 good lines delivered around %q", want, junk)
		}
	})
}

type nopWriteCloser struct{}

func (nopWriteCloser) Write(p []byte) (int, error) { return len(p), nil }
func (nopWriteCloser) Close() error                { return nil }
