// Package listenstream provides a server-sent event stream of JSON-RPC
// messages that mcp-mux writes itself, for the 2026-07-28
// subscriptions/listen streams and the 2025-11-25 sessions' GET streams
// (internal/proxy/sessionhost, which writes whole events: WriteEvent).
//
// A listen stream is idle nearly all its life, and there may be
// inbound.max_sessions of them. Served the SDK's way, each held a throwaway
// server session, its JSON-RPC reader, the handler's goroutine and
// net/http's two per connection with their buffers: four goroutines and
// ~46 KiB of heap and stack (85 KB of RSS). So on HTTP/1.1 a Stream takes
// the connection over once the stream is acknowledged: net/http's
// goroutines and buffers are released, and what stays per listen is the
// connection, the listener's record and one goroutine blocked reading the
// connection to see the client go away (Watch; a few KiB). Events are
// written as HTTP/1.1 chunks, each within WriteTimeout: a client that
// stops reading loses its stream instead of holding up the notifier.
// Where the connection cannot be taken over (HTTP/2, HTTP/1.0), the
// handler's goroutine holds the stream.
package listenstream

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Stream is one event stream. Set WriteTimeout, then Start it.
type Stream struct {
	// WriteTimeout bounds each write on a connection taken over.
	WriteTimeout time.Duration

	mu       sync.Mutex
	w        http.ResponseWriter // the handler's, unless taken over
	conn     net.Conn            // the connection taken over, or nil
	closed   bool
	versions map[string]int64 // newest version sent, by key (NotifyNewer)
}

// Start answers the request with an event stream. On HTTP/1.1 it takes the
// connection over and reports true: the handler may return, and the stream
// lasts until End or the connection closes (Watch).
func (d *Stream) Start(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	if h.Get("Cache-Control") == "" {
		h.Set("Cache-Control", "no-cache")
	}
	if r.ProtoMajor == 1 && r.ProtoMinor == 1 {
		if conn, brw, err := http.NewResponseController(w).Hijack(); err == nil {
			return d.takeOver(conn, brw, h)
		}
	}
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	d.w = w
	return false
}

// takeOver writes the response header on conn, which now belongs to d.
// What the client sent past the request (brw's buffer) would be another
// request on this connection; there is none, the connection closes with the
// stream. Header values are mcp-mux's own (the request id, the stream type).
func (d *Stream) takeOver(conn net.Conn, _ *bufio.ReadWriter, h http.Header) bool {
	d.conn = conn
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\n")
	for k, vs := range h {
		if k == "Connection" || k == "Transfer-Encoding" { // written below
			continue
		}
		for _, v := range vs {
			if !strings.ContainsAny(v, "\r\n") {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
	}
	b.WriteString("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
	_ = conn.SetReadDeadline(time.Time{})
	_ = conn.SetWriteDeadline(time.Now().Add(d.WriteTimeout))
	if _, err := conn.Write([]byte(b.String())); err != nil {
		d.closed = true
		_ = conn.Close()
	}
	return true
}

// Watch returns when the connection taken over closes: the client went
// away, or End or a failed write closed it.
func (d *Stream) Watch() {
	var b [64]byte
	for {
		if _, err := d.conn.Read(b[:]); err != nil {
			return
		}
	}
}

// Write sends one JSON-RPC message as an SSE event, unless the stream ended.
func (d *Stream) Write(msg []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeLocked(msg)
}

// WriteEvent sends ev, one or more whole SSE events ("id: ...\ndata:
// ...\n\n"), unless the stream ended; it reports whether the stream is
// still open after it.
func (d *Stream) WriteEvent(ev []byte) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.writeRaw(nil, ev, nil)
	}
	return !d.closed
}

// writeLocked writes msg as an event, on the handler's writer or as one
// chunk on the connection taken over, unless the stream ended. Called with
// d.mu held.
func (d *Stream) writeLocked(msg []byte) {
	if !d.closed {
		d.writeRaw([]byte("event: message\ndata: "), msg, []byte("\n\n"))
	}
}

// writeRaw writes pre, msg and post, on the handler's writer (flushed) or
// as one chunk on the connection taken over, within WriteTimeout; a failed
// write ends the stream. Called with d.mu held.
func (d *Stream) writeRaw(pre, msg, post []byte) {
	if d.conn == nil {
		_, err := d.w.Write(append(append(append(make([]byte, 0, len(pre)+len(msg)+len(post)), pre...), msg...), post...))
		if err == nil {
			err = http.NewResponseController(d.w).Flush()
		}
		if err != nil {
			d.closed = true
		}
		return
	}
	n := len(pre) + len(msg) + len(post)
	b := make([]byte, 0, n+12)
	b = strconv.AppendInt(b, int64(n), 16)
	b = append(b, "\r\n"...)
	b = append(b, pre...)
	b = append(b, msg...)
	b = append(b, post...)
	b = append(b, "\r\n"...)
	_ = d.conn.SetWriteDeadline(time.Now().Add(d.WriteTimeout))
	if _, err := d.conn.Write(b); err != nil {
		d.closed = true
		_ = d.conn.Close() // Watch returns: the stream ends
	}
}

// Notify sends a notification with params (a JSON object or a value that
// marshals to one).
func (d *Stream) Notify(method string, params any) {
	b, err := json.Marshal(params)
	if err != nil {
		return
	}
	d.Write(wire.AppendNotification(nil, method, b))
}

// NotifyNewer sends a notification with params (JSON) about key at
// version, unless a newer version of key was sent already (events may be
// fetched concurrently).
func (d *Stream) NotifyNewer(key string, version int64, method string, params []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.versions[key] >= version {
		return
	}
	if d.versions == nil {
		d.versions = make(map[string]int64)
	}
	d.versions[key] = version
	d.writeLocked(wire.AppendNotification(nil, method, params))
}

// End sends last (if any) and ends the stream; a connection taken over is
// closed. No write follows.
func (d *Stream) End(last []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if last != nil {
		d.writeLocked(last)
	}
	if d.closed {
		return
	}
	d.closed = true
	if d.conn != nil {
		_ = d.conn.SetWriteDeadline(time.Now().Add(d.WriteTimeout))
		_, _ = d.conn.Write([]byte("0\r\n\r\n"))
		_ = d.conn.Close()
	}
}
