// Package credscrub is where an upstream's errors become text: it removes
// every credential value the upstream holds for a request — the URL's user
// info and query values, static headers and stdio env values, and the
// complete header set the request carried (OAuth token, user_auth value,
// headers from the secrets carrier) — so a server that echoes a credential,
// or a Go transport error that quotes the URL, reveals nothing.
package credscrub

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mcp-mux/mcp-mux/internal/secret"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Scrubber scrubs one upstream's errors. It is safe for concurrent use.
type Scrubber struct {
	static *secret.Scrubber // URL, static headers, env: built once
}

// New returns the Scrubber of an upstream at url with static headers and
// stdio env values env.
func New(url string, header http.Header, env map[string]string) *Scrubber {
	sc := &secret.Scrubber{}
	sc.AddURL(url)
	addHeaders(sc, header)
	for _, v := range env {
		sc.Add(v)
	}
	return &Scrubber{static: sc}
}

// Error scrubs err of a request that carried h. A JSON-RPC error keeps its
// type, with its message and data scrubbed.
func (s *Scrubber) Error(err error, h http.Header) error {
	if err == nil {
		return nil
	}
	sc := s.For(h)
	var we *wire.Error
	if errors.As(err, &we) {
		out := &wire.Error{Code: we.Code, Message: sc.Scrub(we.Message)}
		if len(we.Data) > 0 {
			if d := sc.Scrub(string(we.Data)); json.Valid([]byte(d)) {
				out.Data = json.RawMessage(d)
			}
		}
		return out
	}
	return sc.Error(err)
}

// withheldToolError replaces a tool error result that scrubbing would have
// turned into invalid JSON.
var withheldToolError = json.RawMessage(`{"content":[{"type":"text","text":"the MCP server's tool error was withheld: it could not be cleaned of credentials"}],"isError":true}`)

// ToolError scrubs a CallToolResult that is a tool error (isError), which
// is error text as much as a JSON-RPC error is. Other results pass
// unchanged.
func (s *Scrubber) ToolError(raw json.RawMessage, h http.Header) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"isError"`)) {
		return raw
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(raw, &r) != nil || !r.IsError {
		return raw
	}
	out := s.For(h).Scrub(string(raw))
	if out == string(raw) {
		return raw
	}
	if !json.Valid([]byte(out)) {
		return withheldToolError
	}
	return json.RawMessage(out)
}

// For returns the secret.Scrubber of a request that carried h: the static
// one extended by h.
func (s *Scrubber) For(h http.Header) *secret.Scrubber {
	if len(h) == 0 {
		return s.static
	}
	sc := s.static.Clone()
	addHeaders(sc, h)
	return sc
}

func addHeaders(sc *secret.Scrubber, h http.Header) {
	for _, vs := range h {
		for _, v := range vs {
			sc.AddHeaderValue(v)
		}
	}
}
