package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The 2025-11-25 Streamable HTTP wire, spoken raw.
const (
	protocolVersion = "2025-11-25"
	toolName        = "up_echo" // the upstream's echo, prefixed with its server name
)

// clients hands out the HTTP client of each new session: the same
// keep-alive client (conns shared) or a client of its own, whose one
// connection stays open in its idle pool (conns each).
type clients struct {
	each   bool
	shared *http.Client

	mu  sync.Mutex
	all []*http.Client
}

func newClients(conns string) *clients {
	c := &clients{each: conns == "each"}
	if !c.each {
		c.shared = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}
		c.all = append(c.all, c.shared)
	}
	return c
}

func (c *clients) next() *http.Client {
	if !c.each {
		return c.shared
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}, Timeout: 30 * time.Second}
	c.mu.Lock()
	c.all = append(c.all, hc)
	c.mu.Unlock()
	return hc
}

func (c *clients) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, hc := range c.all {
		hc.CloseIdleConnections()
	}
}

// session is one open downstream session.
type session struct {
	id   string
	hc   *http.Client
	name string // its echo text
	seq  int    // the last request id
}

// rpcResponse is the part of a JSON-RPC response the checks read.
type rpcResponse struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// open initializes a session, sends notifications/initialized and calls
// the echo tool once, checking each answer.
func (m *muxProcess) open(ctx context.Context, hc *http.Client, name string) (*session, error) {
	s, err := m.initialize(ctx, hc, name)
	if err != nil {
		return nil, err
	}
	if err := m.call(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

// initialize opens a session: initialize, then notifications/initialized.
func (m *muxProcess) initialize(ctx context.Context, hc *http.Client, name string) (*session, error) {
	s := &session{hc: hc, name: name}
	init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"sessionmem","version":"1"}}}`
	status, hdr, res, err := m.post(ctx, s, init)
	switch {
	case err != nil:
		return nil, fmt.Errorf("initialize: %w", err)
	case status != http.StatusOK || res == nil || res.Error != nil || res.Result == nil:
		return nil, fmt.Errorf("initialize: status %d, %s", status, describe(res))
	}
	if s.id = hdr.Get("Mcp-Session-Id"); s.id == "" {
		return nil, errors.New("initialize: no Mcp-Session-Id header")
	}
	s.seq = 1
	status, _, _, err = m.post(ctx, s, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil || status/100 != 2 {
		return nil, fmt.Errorf("notifications/initialized: status %d, %v", status, err)
	}
	return s, nil
}

// waitTools waits until tools/list on a session of hc names the echo tool:
// the mux has discovered the upstream.
func (m *muxProcess) waitTools(ctx context.Context, hc *http.Client, limit time.Duration) error {
	s, err := m.initialize(ctx, hc, "tools")
	if err != nil {
		return err
	}
	deadline := time.Now().Add(limit)
	for {
		s.seq++
		_, _, res, err := m.post(ctx, s, `{"jsonrpc":"2.0","id":`+strconv.Itoa(s.seq)+`,"method":"tools/list"}`)
		if err == nil && res != nil && res.Error == nil {
			var r struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			_ = json.Unmarshal(res.Result, &r)
			for _, t := range r.Tools {
				if t.Name == toolName {
					return nil
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("tools/list did not name %s within %s (last: %v, %s)", toolName, limit, err, describe(res))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// call calls the echo tool on s and checks that its text comes back.
func (m *muxProcess) call(ctx context.Context, s *session) error {
	s.seq++
	args, _ := json.Marshal(map[string]any{"name": toolName, "arguments": map[string]string{"text": s.name}})
	body := `{"jsonrpc":"2.0","id":` + strconv.Itoa(s.seq) + `,"method":"tools/call","params":` + string(args) + `}`
	status, _, res, err := m.post(ctx, s, body)
	switch {
	case err != nil:
		return fmt.Errorf("tools/call: %w", err)
	case status != http.StatusOK || res == nil || res.Error != nil:
		return fmt.Errorf("tools/call: status %d, %s", status, describe(res))
	case string(res.ID) != strconv.Itoa(s.seq):
		return fmt.Errorf("tools/call: answer to id %s, want %d", res.ID, s.seq)
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal(res.Result, &r); err != nil || r.IsError || len(r.Content) != 1 || r.Content[0].Text != s.name {
		return fmt.Errorf("tools/call: unexpected result %.200s", res.Result)
	}
	return nil
}

func describe(res *rpcResponse) string {
	switch {
	case res == nil:
		return "no JSON-RPC response"
	case res.Error != nil:
		return fmt.Sprintf("error %d %q", res.Error.Code, res.Error.Message)
	}
	return fmt.Sprintf("result %.200s", res.Result)
}

// maxBody bounds what one answer may be.
const maxBody = 1 << 20

// post sends one message on s and reads the whole answer, a JSON body or an
// event stream, returning the JSON-RPC response in it (nil for none).
func (m *muxProcess) post(ctx context.Context, s *session, body string) (int, http.Header, *rpcResponse, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/mcp", strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if s.id != "" {
		req.Header.Set("Mcp-Session-Id", s.id)
		req.Header.Set("Mcp-Protocol-Version", protocolVersion)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return resp.StatusCode, resp.Header, nil, err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return resp.StatusCode, resp.Header, nil, nil
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		res, err := fromEventStream(b)
		return resp.StatusCode, resp.Header, res, err
	}
	var res rpcResponse
	if err := json.Unmarshal(b, &res); err != nil {
		return resp.StatusCode, resp.Header, nil, fmt.Errorf("answer is not JSON: %.200s", b)
	}
	return resp.StatusCode, resp.Header, &res, nil
}

// fromEventStream returns the response among the stream's messages (the
// last event whose data has a result or an error).
func fromEventStream(b []byte) (*rpcResponse, error) {
	var found *rpcResponse
	var data bytes.Buffer
	flush := func() {
		if data.Len() > 0 {
			var r rpcResponse
			if json.Unmarshal(data.Bytes(), &r) == nil && (r.Result != nil || r.Error != nil) {
				found = &r
			}
			data.Reset()
		}
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), maxBody)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	flush()
	if found == nil {
		return nil, fmt.Errorf("no response in the event stream: %.200s", b)
	}
	return found, sc.Err()
}
