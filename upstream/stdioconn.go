package upstream

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
// banner), lines over maxFrame bytes and, after stop is closed, everything,
// are discarded. Skipped lines are logged without their content.
func readLines(r io.Reader, out chan<- []byte, stop <-chan struct{}, log *rateLog) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	skipping := false // inside a line over maxFrame
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !skipping && len(long)+len(chunk) > maxFrame {
				log.Warn("skipping a stdout line longer than the frame limit", "limit_bytes", maxFrame)
				long, skipping = nil, true
			}
			if !skipping {
				long = append(long, chunk...)
			}
			continue
		}
		line := chunk
		switch {
		case skipping:
			line, skipping = nil, false
		case long != nil:
			line, long = append(long, chunk...), nil
		}
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if t[0] == '{' || t[0] == '[' {
				select {
				case out <- bytes.Clone(t):
				case <-stop:
					_, _ = io.Copy(io.Discard, br) // keep the child from blocking on a full pipe
					return
				}
			} else {
				log.Warn("ignoring non-JSON line on stdout", "bytes", len(t))
			}
		}
		if err != nil {
			return
		}
	}
}

// lineTransport connects to a started stdio process.
type lineTransport struct{ p *process }

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

func (c *lineConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if len(c.queue) > 0 {
		m := c.queue[0]
		c.queue = c.queue[1:]
		return m, nil
	}
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closed:
			return nil, io.EOF
		case line, ok := <-c.lines:
			if !ok {
				return nil, io.EOF
			}
			if _, err := wire.Scan(line); err != nil {
				c.log.Warn("skipping a stdout line nested deeper than the limit", "bytes", len(line), "max_depth", wire.MaxDepth)
				if msgs := deepLine(line); len(msgs) > 0 {
					c.queue = msgs[1:]
					return msgs[0], nil
				}
				continue
			}
			msgs, err := decodeLine(line)
			if err != nil {
				c.log.Warn("skipping a stdout line that is not a complete JSON-RPC message", "bytes", len(line))
				continue
			}
			c.queue = msgs[1:]
			return msgs[0], nil
		}
	}
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
