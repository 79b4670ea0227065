package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The real-client mode: each session is a go-sdk client session
// (mcp.StreamableClientTransport, pinned to 2025-11-25) that initializes,
// calls the echo tool once and keeps the standalone GET stream open as the
// go-sdk client opens it, then idles. The clients run in this process,
// never in the mux's, so their memory is not the mux's.

// sdkSession is one go-sdk client session held open.
type sdkSession struct {
	cs   *mcp.ClientSession
	name string
}

// sdkClients hands out the HTTP client of each go-sdk session: one shared
// keep-alive client (conns shared; each GET stream still holds a
// connection of its own) or a client per session (conns each: its GET
// stream's connection and one idle for its POSTs).
type sdkClients struct {
	each   bool
	shared *http.Client
	client *mcp.Client

	mu       sync.Mutex
	all      []*http.Client
	sessions []*mcp.ClientSession
}

func newSDKClients(conns string) *sdkClients {
	c := &sdkClients{each: conns == "each",
		client: mcp.NewClient(&mcp.Implementation{Name: "sessionmem", Version: "1"}, nil)}
	if !c.each {
		c.shared = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
		c.all = append(c.all, c.shared)
	}
	return c
}

func (c *sdkClients) next() *http.Client {
	if !c.each {
		return c.shared
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	c.mu.Lock()
	c.all = append(c.all, hc)
	c.mu.Unlock()
	return hc
}

// close ends every session (DELETE) and closes the idle connections.
func (c *sdkClients) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cs := range c.sessions {
		_ = cs.Close()
	}
	for _, hc := range c.all {
		hc.CloseIdleConnections()
	}
}

// openSDK connects one go-sdk session, which opens its GET stream, and
// calls the echo tool once.
func (m *muxProcess) openSDK(ctx context.Context, c *sdkClients, name string) (*sdkSession, error) {
	t := &mcp.StreamableClientTransport{Endpoint: m.base + "/mcp", HTTPClient: c.next()}
	cs, err := c.client.Connect(ctx, t, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	c.mu.Lock()
	c.sessions = append(c.sessions, cs)
	c.mu.Unlock()
	s := &sdkSession{cs: cs, name: name}
	if err := s.call(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// call calls the echo tool and checks that its text comes back.
func (s *sdkSession) call(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{Name: toolName, Arguments: map[string]string{"text": s.name}})
	if err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	if len(res.Content) != 1 || res.IsError {
		return fmt.Errorf("tools/call: unexpected result %+v", res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != s.name {
		return fmt.Errorf("tools/call: unexpected content %+v", res.Content[0])
	}
	return nil
}
