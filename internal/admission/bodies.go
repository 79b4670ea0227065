package admission

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/bounds"
	"github.com/mcp-mux/mcp-mux/internal/reqid"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// Request bodies.
//
// Every request body on the listener has a read deadline (Limit), cleared
// when the body has been read, so only a slow body is cut off, never a
// long response stream. A /mcp POST body is read once (Read), within Max
// bytes, and scanned (wire.Scan) before anything decodes it: nesting deeper
// than wire.MaxDepth and batches of more than wire.MaxBatch messages are
// refused with a JSON-RPC error.

// BodyOptions configure Bodies.
type BodyOptions struct {
	Max     int64         // bytes of a /mcp POST body
	Timeout time.Duration // the body's read deadline
	Buffers *wire.Buffers // the buffers bodies are read into
	Log     hclog.Logger  // a debug line per body not received in time
}

// Bodies reads and bounds request bodies.
type Bodies struct {
	opts BodyOptions
}

// NewBodies returns Bodies with opts.
func NewBodies(opts BodyOptions) *Bodies {
	return &Bodies{opts: opts}
}

// Read reads a /mcp POST body within Max bytes and the body deadline, and
// checks its shape. On failure it has answered the request and returns
// nil. The caller returns the buffer with Buffers.Put(bp).
func (b *Bodies) Read(w http.ResponseWriter, r *http.Request) (bp *[]byte, sh wire.Shape) {
	b.Limit(w, r) // a server's guard has, unless this handler is served on its own
	bp = b.opts.Buffers.Get()
	buf := bytes.NewBuffer(*bp)
	n, err := buf.ReadFrom(io.LimitReader(r.Body, b.opts.Max+1))
	*bp = buf.Bytes()
	if b.received(w, r, n, err) {
		var ok bool
		if sh, ok = scan(w, *bp); ok {
			return bp, sh
		}
	}
	b.opts.Buffers.Put(bp)
	return nil, sh
}

// received reports whether the body was read whole (n bytes, err), within
// the deadline and Max; else it answers the request.
func (b *Bodies) received(w http.ResponseWriter, r *http.Request, n int64, err error) bool {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		reqid.Logger(r.Context(), b.opts.Log).Debug("request body not received in time", "timeout", b.opts.Timeout)
		mcpwire.WriteError(w, http.StatusRequestTimeout, nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request body not received within %s", b.opts.Timeout), nil)
	case err != nil:
		mcpwire.WriteError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest, "failed to read the request body", nil)
	case n > b.opts.Max:
		mcpwire.WriteError(w, http.StatusRequestEntityTooLarge, nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request body exceeds %d bytes", b.opts.Max), nil)
	default:
		return true
	}
	return false
}

// scan checks the shape of body (wire.Scan, wire.MaxBatch) and its
// caller-chosen values (CheckValues); else it answers the request.
func scan(w http.ResponseWriter, body []byte) (wire.Shape, bool) {
	sh, err := wire.Scan(body)
	switch {
	case err != nil:
		mcpwire.WriteError(w, http.StatusBadRequest, boundedID(body), jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("request refused: %v", err), nil)
	case sh.Batch && sh.Len > wire.MaxBatch:
		mcpwire.WriteError(w, http.StatusBadRequest, nil, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("batch of %d messages exceeds the limit of %d", sh.Len, wire.MaxBatch), nil)
	default:
		if verr := CheckValues(body, sh); verr != nil {
			// The id is answered only when it is not what is refused.
			var id []byte
			if !sh.Batch {
				id = boundedID(body)
			}
			mcpwire.WriteError(w, http.StatusBadRequest, id, jsonrpc.CodeInvalidRequest, "request refused: "+verr.Error(), nil)
			return sh, false
		}
		return sh, true
	}
	return sh, false
}

// boundedID is the top-level id of body to answer a refusal with: none
// when it is past its bound.
func boundedID(body []byte) []byte {
	if id := wire.TopLevelID(body); len(id) <= bounds.ID {
		return id
	}
	return nil
}

// Limit gives the body of r the body deadline (Timeout): reading it fails
// past the deadline, and reading it to its end clears the deadline, so a
// response stream lasts as long as its call. Only the body has a deadline,
// so a connection can stay open with a slow stream but not with a slow
// body. A connection that does not support deadlines is left alone.
func (b *Bodies) Limit(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	if _, ok := r.Body.(*deadlineBody); ok {
		return
	}
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(b.opts.Timeout)) != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

// deadlineBody clears the connection's read deadline at the end of the body.
// A body that timed out keeps it: net/http's attempt to drain the rest must
// fail at once too (the connection is closed).
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

// Read reads the body, clearing the deadline at its end.
func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.done && !errors.Is(err, os.ErrDeadlineExceeded) {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
