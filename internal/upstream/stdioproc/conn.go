package stdioproc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// A stdio server's stdout is framed here, not by the SDK: the SDK's stdio
// connection runs one json.Decoder over the whole stream, so a truncated line
// makes the decoder read the next messages as the rest of that value (and
// hang, or fail the session). readLines splits the stream into lines itself,
// and lineConn decodes each line on its own: a line that is not a complete
// JSON-RPC message is skipped, and every later message is still delivered.

// readLines sends every JSON line of r (a copy, without surrounding space)
// on out, and closes out when r ends. Lines that do not start like JSON (a
// banner), lines over MaxFrame bytes and, after stop is closed, everything,
// are discarded. Skipped lines are logged without their content.
func readLines(r io.Reader, out chan<- []byte, stop <-chan struct{}, log *rateLog) {
	defer close(out)
	f := framer{br: bufio.NewReaderSize(r, 64<<10), log: log}
	for {
		line, err := f.next()
		if !deliver(line, out, stop, log) {
			_, _ = io.Copy(io.Discard, f.br) // keep the child from blocking on a full pipe
			return
		}
		if err != nil {
			return
		}
	}
}

// framer cuts stdout into lines, leaving out those over MaxFrame.
type framer struct {
	br       *bufio.Reader
	log      *rateLog
	long     []byte // a line longer than br's buffer, so far
	skipping bool   // inside a line over MaxFrame
}

// next returns the next line (nil for one over MaxFrame; it may end
// without a newline at the end of the stream) and the read error that
// ended it, if any.
func (f *framer) next() ([]byte, error) {
	for {
		chunk, err := f.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			f.grow(chunk)
			continue
		}
		line := chunk
		switch {
		case f.skipping:
			line, f.skipping = nil, false
		case f.long != nil:
			line, f.long = append(f.long, chunk...), nil
		}
		return line, err
	}
}

// grow adds a full buffer's chunk to the long line being read, or starts
// skipping that line once it passes MaxFrame.
func (f *framer) grow(chunk []byte) {
	if !f.skipping && len(f.long)+len(chunk) > MaxFrame {
		f.log.Warn("skipping a stdout line longer than the frame limit", "limit_bytes", MaxFrame)
		f.long, f.skipping = nil, true
	}
	if !f.skipping {
		f.long = append(f.long, chunk...)
	}
}

// deliver sends line on out (a copy, without surrounding space) if it looks
// like JSON, and logs any other non-blank line; false when stop was closed
// first.
func deliver(line []byte, out chan<- []byte, stop <-chan struct{}, log *rateLog) bool {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return true
	}
	if t[0] != '{' && t[0] != '[' {
		log.Warn("ignoring non-JSON line on stdout", "bytes", len(t))
		return true
	}
	select {
	case out <- bytes.Clone(t):
		return true
	case <-stop:
		return false
	}
}

// lineTransport connects to a started stdio process.
type lineTransport struct{ p *Process }

// Connect returns the process's connection; it does no I/O.
func (t *lineTransport) Connect(context.Context) (mcp.Connection, error) {
	return &lineConn{lines: t.p.lines, stop: t.p.stopReading, w: t.p.stdin, log: t.p.skipped, closed: make(chan struct{})}, nil
}

// lineConn is newline-delimited JSON-RPC over a process's stdin and stdout,
// one message (or batch) per line.
type lineConn struct {
	lines <-chan []byte
	stop  func() // ends delivery of lines
	w     io.WriteCloser
	log   *rateLog
	queue []jsonrpc.Message // rest of a batch; Read is not called concurrently

	writeMu   sync.Mutex
	closed    chan struct{}
	closeOnce sync.Once
}

// Read returns the next message: the rest of a batch line first, then the
// messages of the next line that has any.
func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for len(c.queue) == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case line, ok := <-c.lines:
			if !ok {
				return nil, io.EOF
			}
			c.queue = c.messages(line)
		}
	}
	m := c.queue[0]
	c.queue = c.queue[1:]
	return m, nil
}

// messages decodes one line into its messages; none when the line is
// skipped (and logged, without its content). A line nested too deep
// yields only the replies deepLine stands in for.
func (c *lineConn) messages(line []byte) []jsonrpc.Message {
	if _, err := wire.Scan(line); err != nil {
		c.log.Warn("skipping a stdout line nested deeper than the limit", "bytes", len(line), "max_depth", wire.MaxDepth)
		return deepLine(line)
	}
	msgs, err := decodeLine(line)
	if err != nil {
		c.log.Warn("skipping a stdout line that is not a complete JSON-RPC message", "bytes", len(line))
		return nil
	}
	return msgs
}

// decodeLine decodes one line: a JSON-RPC message or a batch of them.
func decodeLine(line []byte) ([]jsonrpc.Message, error) {
	if line[0] != '[' {
		m, err := jsonrpc.DecodeMessage(line)
		if err != nil {
			return nil, err
		}
		return []jsonrpc.Message{m}, nil
	}
	var raws []json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		return nil, err
	}
	if len(raws) == 0 {
		return nil, errors.New("empty batch")
	}
	msgs := make([]jsonrpc.Message, 0, len(raws))
	for _, r := range raws {
		m, err := jsonrpc.DecodeMessage(r)
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// Write sends msg as one line.
func (c *lineConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	select {
	case <-c.closed:
		return mcp.ErrConnectionClosed
	default:
	}
	_, err = c.w.Write(append(data, '\n'))
	return err
}

// Close ends the connection; closing stdin tells the server to exit.
func (c *lineConn) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		c.stop()
		err = c.w.Close() // unblocks a Write stuck on a full pipe
	})
	return err
}

// SessionID is empty: a stdio connection has no session id.
func (c *lineConn) SessionID() string { return "" }

// rateLog logs at most rateBurst warnings per second and then how many it
// left out: a server printing garbage must not flood the log.
type rateLog struct {
	log     hclog.Logger
	mu      sync.Mutex
	window  time.Time
	count   int
	dropped int
}

const rateBurst = 5

// Warn logs msg unless the second's burst is spent.
func (r *rateLog) Warn(msg string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.window) >= time.Second {
		if r.dropped > 0 {
			r.log.Warn("more stdout lines skipped (rate-limited log)", "lines", r.dropped)
		}
		r.window, r.count, r.dropped = now, 0, 0
	}
	if r.count >= rateBurst {
		r.dropped++
		return
	}
	r.count++
	r.log.Warn(msg, args...)
}
