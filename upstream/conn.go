package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// ProtocolVersion is the MCP version mcp-mux asks upstreams for. Pinning it
// skips the SDK's server/discover probe, which some stdio servers exit on.
const ProtocolVersion = "2025-11-25"

// conn is one initialized upstream session.
type conn struct {
	cs      *mcp.ClientSession
	proc    *process     // stdio only
	capture *captureConn // stdio and sse
	direct  *direct      // http only
	cancel  context.CancelFunc
	done    chan struct{} // closed when the session has ended
}

// dial starts a session: for stdio a new process, for http/sse a new
// upstream session. The whole bring-up is bounded by InitTimeout.
func (u *Upstream) dial(ctx context.Context) (*conn, error) {
	connCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &conn{cancel: cancel, done: make(chan struct{})}
	var timedOut bool
	stop := func() bool { return true }
	if u.opts.InitTimeout > 0 {
		t := time.AfterFunc(u.opts.InitTimeout, func() { timedOut = true; cancel() })
		stop = t.Stop
	}
	// The caller's cancellation also aborts the bring-up.
	unwatch := context.AfterFunc(ctx, cancel)
	defer unwatch()

	var transport mcp.Transport
	switch u.opts.Transport {
	case Stdio:
		p, err := startProcess(&u.opts, u.log)
		if err != nil {
			stop()
			cancel()
			return nil, err
		}
		c.proc = p
		transport = &captureTransport{inner: &mcp.IOTransport{Reader: p.stdout, Writer: p.stdin, MaxLineLength: maxFrame}}
	case SSE:
		transport = &captureTransport{inner: &mcp.SSEClientTransport{Endpoint: u.opts.URL, HTTPClient: u.sdkHTTP}}
	case HTTP:
		transport = &mcp.StreamableClientTransport{Endpoint: u.opts.URL, HTTPClient: u.sdkHTTP, MaxRetries: 2}
	default:
		stop()
		cancel()
		return nil, fmt.Errorf("unsupported transport %q", u.opts.Transport)
	}
	cs, err := u.client.Connect(connCtx, transport, &mcp.ClientSessionOptions{ProtocolVersion: ProtocolVersion})
	if !stop() || err != nil {
		if cs != nil {
			_ = cs.Close()
		}
		c.kill()
		if timedOut {
			return nil, fmt.Errorf("initialize timed out after %s", u.opts.InitTimeout)
		}
		if err == nil {
			err = context.Canceled
		}
		return nil, fmt.Errorf("initialize: %w", err)
	}
	c.cs = cs
	if ct, ok := transport.(*captureTransport); ok {
		c.capture = ct.conn
	}
	if u.opts.Transport == HTTP {
		c.direct = &direct{url: u.opts.URL, client: u.http, header: u.opts.Header, sessionID: cs.ID(),
			protocol: cs.InitializeResult().ProtocolVersion, maxEvent: maxFrame, onMessage: u.opts.OnMessage}
	}
	go func() {
		_ = cs.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
	}
	if c.proc != nil {
		select {
		case <-c.proc.exited:
			return false
		default:
		}
	}
	return true
}

// close ends the session and, for stdio, the process group.
func (c *conn) close() {
	if c.cs != nil {
		_ = c.cs.Close()
	}
	c.kill()
}

func (c *conn) kill() {
	c.cancel()
	if c.proc != nil {
		c.proc.stop()
	}
}

// request sends method with raw params and returns the raw result.
func (c *conn) request(ctx context.Context, method string, params json.RawMessage, extra http.Header) (json.RawMessage, error) {
	if c.direct != nil {
		return c.direct.call(ctx, method, params, extra)
	}
	s := &slot{}
	sctx := withSlot(ctx, s)
	var err error
	switch method {
	case "tools/call":
		var p wire.CallParams
		if err := wire.DecodeCallParams(params, &p); err != nil {
			return nil, err
		}
		cp := &mcp.CallToolParams{Name: p.Name, Arguments: p.Arguments}
		if len(p.Meta) > 0 {
			if err := json.Unmarshal(p.Meta, &cp.Meta); err != nil {
				return nil, fmt.Errorf("decoding _meta: %w", err)
			}
		}
		if cp.Arguments == nil {
			cp.Arguments = json.RawMessage(`{}`)
		}
		_, err = c.cs.CallTool(sctx, cp)
	case "tools/list":
		var p mcp.ListToolsParams
		if len(params) > 0 {
			if err := json.Unmarshal(params, &p); err != nil {
				return nil, err
			}
		}
		_, err = c.cs.ListTools(sctx, &p)
	default:
		return nil, fmt.Errorf("method %q is not forwarded raw", method)
	}
	if c.capture != nil {
		c.capture.forget(s)
	}
	if s.err != nil {
		return nil, &wire.Error{Code: s.err.Code, Message: s.err.Message, Data: s.err.Data}
	}
	if err != nil {
		return nil, err
	}
	if s.raw == nil {
		return nil, errors.New("upstream result was not captured")
	}
	return s.raw, nil
}
