package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/proxy/modern"
	"github.com/mcp-mux/mcp-mux/internal/telemetry"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// The tools/call fast path.
//
// A tools/call or tools/list on an established session (not in a batch) is
// answered here, before the SDK's handler: the envelope is decoded once
// without the SDK's per-message 32 KiB decoder buffers, the upstream's raw
// result is written back as an application/json response (the cached
// tools/list bytes as one SSE event, as the SDK sends them), and nothing else
// is allocated per call. A call with a progress token takes this path too:
// the first progress, log message or server-to-client request upgrades its
// response to an event stream (see callpath.FastSink), and the client's answers to
// such requests are taken here. 2026-07-28 requests go to their own fast path
// (package modern: modern.Handler.Serve, fast or through the SDK); every
// other message (initialize, notifications, GET streams, batches) goes to the
// SDK unchanged, so the protocol surface is the SDK's. A client that disconnects
// cancels its call; notifications/cancelled for a fast-path call cancels it
// too.

func (s *Server) mcpHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(requestHeader)
		switch r.Method {
		case http.MethodPost:
			bp, sh := s.bodies.Read(w, r)
			if bp == nil {
				return
			}
			defer s.buffers.Put(bp)
			body := *bp
			defer s.panics.CatchHTTP(w, body) // before the buffer goes back (internal/panicguard)
			// Handlers after this one get a copy: the buffer goes back to the pool on return.
			r.Body = io.NopCloser(bytes.NewReader(body)) // read, if at all, before the copy below
			if modern.Is(r) {
				s.modern.Serve(w, r, body, sh)
				return
			}
			s.serveSession(w, r, body, sh.Batch) // host.go
		case http.MethodGet:
			s.sessions.ServeStream(w, r) // package sessions
		case http.MethodDelete:
			s.sessions.ServeDelete(w, r)
		default:
			w.Header().Set("Allow", "GET, POST, DELETE")
			http.Error(w, "Method Not Allowed", http.StatusMethodNotAllowed)
		}
	})
}

// serveFast handles the message m if it is a fast-path message and
// reports whether it did.
func (s *Server) serveFast(w http.ResponseWriter, r *http.Request, st *callpath.Session, m *wire.Message) bool {
	switch {
	case m.Method == "tools/call" && m.IsCall():
		var p wire.CallParams
		if wire.DecodeCallParams(m.Params, &p) != nil {
			return false
		}
		s.fastCall(w, r, st, m, &p)
		return true
	case m.Method == "tools/list" && m.IsCall():
		s.fastList(w, r, st, m)
		return true
	case m.Method == "notifications/cancelled":
		st.CancelCall(m.Params)
	}
	return false
}

func (s *Server) fastCall(w http.ResponseWriter, r *http.Request, st *callpath.Session, m *wire.Message, p *wire.CallParams) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	idKey := string(m.ID)
	st.Track(idKey, cancel)
	defer st.Untrack(idKey)

	k := callpath.NewFastSink(st, w)
	k.Resumable(m.ID)
	// The span learns the tool's name in spans and metrics from the
	// pipeline's one lookup (_unknown for one not in the caller's view).
	ctx, span := s.tel.Server(ctx, telemetry.Op{Method: "tools/call", RequestID: string(m.ID), Session: st.ID,
		Protocol: st.Protocol, Transport: "tcp", User: st.User}, p.Meta, r.Header)
	c := s.calls.ToolCall(ctx, st, callpath.LegacyEra{}, k, r.Header, p)
	c.Named = span.SetTool
	raw, err := s.calls.GuardedRun(ctx, c)
	span.End(err, err == nil && wire.IsToolError(raw))

	out := s.buffers.Get()
	defer s.buffers.Put(out)
	var b []byte
	if err != nil {
		var je *jsonrpc.Error
		switch {
		case errors.As(err, &je):
			b = wire.AppendError((*out)[:0], m.ID, je.Code, je.Message, je.Data)
		case errors.Is(err, context.Canceled):
			b = wire.AppendError((*out)[:0], m.ID, jsonrpc.CodeInternalError, "request cancelled", nil)
		default:
			b = wire.AppendError((*out)[:0], m.ID, jsonrpc.CodeInternalError, "internal error", nil)
		}
	} else {
		b = wire.AppendResult((*out)[:0], m.ID, raw)
	}
	*out = b[:0]
	k.Finish(b)
}

// fastList answers tools/list with the session's cached list bytes, as one
// event on the POST's own stream like the SDK answers it.
func (s *Server) fastList(w http.ResponseWriter, r *http.Request, st *callpath.Session, m *wire.Message) {
	if t := s.tel; t.Enabled() {
		var meta json.RawMessage
		if t.Tracing() {
			meta = wire.MetaOf(m.Params)
		}
		_, span := t.Server(r.Context(), telemetry.Op{Method: "tools/list", RequestID: string(m.ID), Session: st.ID,
			Protocol: st.Protocol, Transport: "tcp", User: st.User}, meta, r.Header)
		defer span.End(nil, false)
	}
	rt := s.rt.Load()
	rt.RefreshStale(time.Now())            // lists past the TTL their servers gave
	raw := st.ToolsList(rt.Catalog.Load()) // the session's profile's view
	out := s.buffers.Get()
	defer s.buffers.Put(out)
	b := wire.AppendResult((*out)[:0], m.ID, raw)
	*out = b[:0]
	callpath.NewFastSink(st, w).Event(b)
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
