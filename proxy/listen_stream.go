package proxy

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

// Listen streams mcp-mux writes itself.
//
// A subscriptions/listen stream is idle nearly all its life, and there may
// be inbound.max_sessions of them. Served the SDK's way, each held a
// throwaway server session, its JSON-RPC reader, the handler's goroutine and
// net/http's two per connection with their buffers: four goroutines and
// ~46 KiB of heap and stack (85 KB of RSS). So mcp-mux serves listens
// itself (serveListen) and, on HTTP/1.1, takes the connection over once the
// stream is acknowledged: net/http's goroutines and buffers are released,
// and what stays per listen is the connection, the listener's record and
// one goroutine blocked reading the connection to see the client go away
// (a few KiB). Events are written as HTTP/1.1 chunks, each within
// notifyTimeout: a client that stops reading loses its stream instead of
// holding up the notifier. Where the connection cannot be taken over
// (HTTP/2, HTTP/1.0), the handler's goroutine holds the stream as before.

// directStream is a listen stream mcp-mux writes itself.
type directStream struct {
	mu       sync.Mutex
	w        http.ResponseWriter // the handler's, unless taken over
	conn     net.Conn            // the connection taken over, or nil
	closed   bool
	versions map[string]int64 // newest task version sent, by task id
}

// start answers the request with an event stream. On HTTP/1.1 it takes the
// connection over and reports true: the handler may return, and the stream
// lasts until end or the connection closes (watch).
func (d *directStream) start(w http.ResponseWriter, r *http.Request) bool {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
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
func (d *directStream) takeOver(conn net.Conn, _ *bufio.ReadWriter, h http.Header) bool {
	d.conn = conn
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\n")
	for k, vs := range h {
		for _, v := range vs {
			if !strings.ContainsAny(v, "\r\n") {
				fmt.Fprintf(&b, "%s: %s\r\n", k, v)
			}
		}
	}
	b.WriteString("Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
	_ = conn.SetReadDeadline(time.Time{})
	_ = conn.SetWriteDeadline(time.Now().Add(notifyTimeout))
	if _, err := conn.Write([]byte(b.String())); err != nil {
		d.closed = true
		_ = conn.Close()
	}
	return true
}

// watch returns when the connection taken over closes: the client went
// away, or end or a failed write closed it.
func (d *directStream) watch() {
	var b [64]byte
	for {
		if _, err := d.conn.Read(b[:]); err != nil {
			return
		}
	}
}

// write sends one JSON-RPC message as an SSE event, unless the stream ended.
func (d *directStream) write(msg []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writeLocked(msg)
}

func (d *directStream) writeLocked(msg []byte) {
	if d.closed {
		return
	}
	if d.conn == nil {
		_, _ = fmt.Fprintf(d.w, "event: message\ndata: %s\n\n", msg)
		if f, ok := d.w.(http.Flusher); ok {
			f.Flush()
		}
		return
	}
	const pre, post = "event: message\ndata: ", "\n\n"
	n := len(pre) + len(msg) + len(post)
	b := make([]byte, 0, n+12)
	b = strconv.AppendInt(b, int64(n), 16)
	b = append(b, "\r\n"+pre...)
	b = append(b, msg...)
	b = append(b, post+"\r\n"...)
	_ = d.conn.SetWriteDeadline(time.Now().Add(notifyTimeout))
	if _, err := d.conn.Write(b); err != nil {
		d.closed = true
		_ = d.conn.Close() // watch returns: the listen ends
	}
}

// notify sends a notification with params (a JSON object or a value that
// marshals to one).
func (d *directStream) notify(method string, params any) {
	b, err := json.Marshal(params)
	if err != nil {
		return
	}
	d.write(wire.AppendNotification(nil, method, b))
}

// end sends last (if any) and ends the stream; a connection taken over is
// closed. No write follows.
func (d *directStream) end(last []byte) {
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
		_ = d.conn.SetWriteDeadline(time.Now().Add(notifyTimeout))
		_, _ = d.conn.Write([]byte("0\r\n\r\n"))
		_ = d.conn.Close()
	}
}
