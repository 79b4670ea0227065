package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/secret"
)

// scrub is where upstream errors become text: every error an Upstream
// returns or logs passes through it. It removes every credential value the
// Upstream holds for the request — the URL's user info and query values,
// static headers and stdio env values, and h, the complete header set the
// request carried (OAuth token, user_auth value, headers from the secrets
// carrier) — so an upstream that echoes a credential, or a Go transport
// error that quotes the URL, reveals nothing. A JSON-RPC error keeps its
// type, with its message and data scrubbed.
func (u *Upstream) scrub(err error, h http.Header) error {
	if err == nil {
		return nil
	}
	sc := u.scrubber(h)
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

// scrubToolError scrubs a CallToolResult that is a tool error (isError),
// which is error text as much as a JSON-RPC error is: a server that quotes
// the request's credentials there reveals nothing either. Other results
// pass unchanged.
func (u *Upstream) scrubToolError(raw json.RawMessage, h http.Header) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"isError"`)) {
		return raw
	}
	var r struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(raw, &r) != nil || !r.IsError {
		return raw
	}
	out := u.scrubber(h).Scrub(string(raw))
	if out == string(raw) {
		return raw
	}
	if !json.Valid([]byte(out)) {
		return withheldToolError
	}
	return json.RawMessage(out)
}

// scrubber returns the Scrubber of a request that carried h: the static one
// (URL, static headers, env; built once, see newStaticScrubber) extended by h.
func (u *Upstream) scrubber(h http.Header) *secret.Scrubber {
	if len(h) == 0 {
		return u.static
	}
	sc := u.static.Clone()
	addHeaders(sc, h)
	return sc
}

func newStaticScrubber(opts *Options) *secret.Scrubber {
	sc := &secret.Scrubber{}
	sc.AddURL(opts.URL)
	addHeaders(sc, opts.Header)
	for _, v := range opts.Env {
		sc.Add(v)
	}
	return sc
}

func addHeaders(sc *secret.Scrubber, h http.Header) {
	for _, vs := range h {
		for _, v := range vs {
			sc.AddHeaderValue(v)
		}
	}
}
