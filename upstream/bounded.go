package upstream

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// errTooDeep is the error of a call whose reply nests deeper than
// wire.MaxDepth; the caller sees it as a tool error naming the server.
var errTooDeep = fmt.Errorf("reply refused: %w", wire.ErrTooDeep)

// boundedLines guards the SDK's stdio decoder: every line a stdio server
// writes (one JSON-RPC message) is scanned with wire.Scan before the SDK
// sees it. A line nested deeper than wire.MaxDepth never reaches a decoder:
// the call it answers fails with errTooDeep (fail), an SDK request it
// answers gets an error response in its place, and anything else is dropped
// with a warning. The session and its process live on.
type boundedLines struct {
	src  io.ReadCloser
	br   *bufio.Reader
	fail func(id []byte) bool // fails a pending mcp-mux call; false: not one
	log  hclog.Logger
	// out is the rest of the line being handed out.
	out []byte
	buf []byte
	// lastWarn rate-limits the warning (unix nanos).
	lastWarn atomic.Int64
}

func newBoundedLines(src io.ReadCloser, fail func(id []byte) bool, log hclog.Logger) *boundedLines {
	return &boundedLines{src: src, br: bufio.NewReaderSize(src, 64<<10), fail: fail, log: log}
}

func (b *boundedLines) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		line, err := b.readLine()
		if len(line) > 0 {
			b.out = b.check(line)
		}
		if err != nil && len(b.out) == 0 {
			return 0, err
		}
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

// readLine returns the next line, newline included, up to maxFrame bytes.
func (b *boundedLines) readLine() ([]byte, error) {
	b.buf = b.buf[:0]
	for {
		chunk, err := b.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if len(b.buf)+len(chunk) > maxFrame {
				return nil, fmt.Errorf("stdout line longer than %d bytes", maxFrame)
			}
			b.buf = append(b.buf, chunk...)
			continue
		}
		if len(b.buf) == 0 {
			return chunk, err // the common case: no copy
		}
		b.buf = append(b.buf, chunk...)
		return b.buf, err
	}
}

// check returns the line, or what replaces a line that is too deep.
func (b *boundedLines) check(line []byte) []byte {
	if _, err := wire.Scan(line); err == nil {
		return line
	}
	id := wire.TopLevelID(line)
	b.warn(len(line), id != nil)
	if id == nil || bytes.Equal(id, []byte("null")) || b.fail(id) {
		return nil
	}
	// An answer to one of the SDK's own requests (initialize, ping): answer
	// it with an error the SDK reports, e.g. a failed initialize.
	return append(wire.AppendError(nil, id, jsonrpc.CodeInternalError, errTooDeep.Error()), '\n')
}

func (b *boundedLines) warn(size int, hasID bool) {
	now := time.Now().UnixNano()
	last := b.lastWarn.Load()
	if now-last < int64(10*time.Second) || !b.lastWarn.CompareAndSwap(last, now) {
		return
	}
	b.log.Warn("refusing a message nested deeper than the limit", "max_depth", wire.MaxDepth, "bytes", size, "is_reply", hasID)
}

func (b *boundedLines) Close() error { return b.src.Close() }
