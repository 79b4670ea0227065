package modern

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/mcp-mux/mcp-mux/internal/proxy/callpath"
	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/internal/wire/mcpwire"
)

// The 2026-07-28 protocol headers a caller sends.
//
// MCP-Protocol-Version, Mcp-Method, Mcp-Name and Mcp-Param-* repeat what the
// body says, for intermediaries that route on headers. Each must appear at
// most once: a repeated one is refused (400, -32020 naming it) before either
// path reads it, since the SDK and the fast path read the first and an
// intermediary may have read another. A caller's Mcp-Param-* headers are
// checked against the arguments (paramheader.Headers.Check, with the
// annotations of the tool as mcp-mux lists it) and never forwarded: the
// upstream's are written from the arguments (package upstream/paramheader).

const paramPrefix = "Mcp-Param-"

// singleHeaders are the protocol headers that may appear once.
var singleHeaders = []string{"Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name"}

// repeatedHeader returns the name of a protocol header h carries more
// than once, or "".
func repeatedHeader(h http.Header) string {
	for _, k := range singleHeaders {
		if len(h[k]) > 1 {
			return k
		}
	}
	for k, v := range h {
		if len(v) > 1 && isParamHeader(k) {
			return k
		}
	}
	return ""
}

// isParamHeader reports whether the canonical header name k is an
// Mcp-Param-* header.
func isParamHeader(k string) bool {
	return len(k) > len(paramPrefix) && strings.EqualFold(k[:len(paramPrefix)], paramPrefix)
}

// hasParamHeaders reports whether h carries any Mcp-Param-* header.
func hasParamHeaders(h http.Header) bool {
	for k := range h {
		if isParamHeader(k) {
			return true
		}
	}
	return false
}

// refuseRepeatedHeader answers a 2026-07-28 request that repeats a protocol
// header, and reports whether it did.
func refuseRepeatedHeader(w http.ResponseWriter, r *http.Request, body []byte) bool {
	k := repeatedHeader(r.Header)
	if k == "" {
		return false
	}
	mcpwire.WriteError(w, http.StatusBadRequest, wire.TopLevelID(body), codeHeaderMismatch,
		"the "+k+" header is sent more than once; send it exactly once", nil)
	return true
}

// refuseParamMismatch answers a tools/call whose Mcp-Param-* headers do not
// match its arguments, and reports whether it did. A call with no such
// header, or to a tool mcp-mux does not list, is not checked here.
func (s *Handler) refuseParamMismatch(w http.ResponseWriter, r *http.Request, id json.RawMessage, rt *callpath.Route, arguments json.RawMessage) bool {
	if rt == nil || !hasParamHeaders(r.Header) {
		return false
	}
	err := rt.ParamHeaders().Check(r.Header, arguments)
	if err == nil {
		return false
	}
	var we *wire.Error
	if !errors.As(err, &we) {
		we = &wire.Error{Code: codeHeaderMismatch, Message: err.Error()}
	}
	mcpwire.WriteError(w, http.StatusBadRequest, id, we.Code, we.Message, nil)
	return true
}
