// Package modernreq prepares the requests mcp-mux sends a 2026-07-28
// server, which has no sessions: every request carries the _meta triple
// (protocol version, client info, and as client capabilities those of the
// caller, as a legacy call session declares them) in its params and, over
// HTTP, the standard headers (Mcp-Method, Mcp-Name with the raw name the
// request carries, and for a tools/call the Mcp-Param-* headers of
// paramheader).
package modernreq

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/mcp-mux/mcp-mux/internal/upstream/paramheader"
)

// Version is the protocol revision these requests speak.
const Version = "2026-07-28"

// Request prepares the requests of one client to a 2026-07-28 server: the
// params with the _meta triple, and the standard headers.
type Request struct {
	meta json.RawMessage // the _meta triple's members, without braces
	// metaKeys is meta decoded, for merge to copy; never nil.
	metaKeys map[string]json.RawMessage
	// annotations, when set, are the server's x-mcp-header bindings.
	annotations *atomic.Pointer[paramheader.Index]
}

// New returns the Request of a client that declares caps (the client
// capabilities' JSON; "" for none). annotations, when not nil, hold the
// server's x-mcp-header bindings as discovery last read them.
func New(caps string, annotations *atomic.Pointer[paramheader.Index]) *Request {
	if caps == "" {
		caps = "{}"
	}
	meta := `"io.modelcontextprotocol/protocolVersion":"` + Version + `",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"mcp-mux","version":"1"},` +
		`"io.modelcontextprotocol/logLevel":"debug",` +
		`"io.modelcontextprotocol/clientCapabilities":` + caps
	keys := map[string]json.RawMessage{}
	_ = json.Unmarshal([]byte("{"+meta+"}"), &keys)
	return &Request{meta: json.RawMessage(meta), metaKeys: keys, annotations: annotations}
}

// Params returns params with the _meta triple added (keys the params
// already carry in _meta are kept).
func (m *Request) Params(params []byte) []byte {
	params = bytes.TrimSpace(params)
	if len(params) < 2 || params[0] != '{' {
		params = []byte("{}")
	}
	if !bytes.Contains(params, []byte(`"_meta"`)) {
		return m.prepend(params)
	}
	return m.merge(params)
}

// prepend returns the params object params (without _meta) with _meta
// as its first member.
func (m *Request) prepend(params []byte) []byte {
	out := make([]byte, 0, len(params)+len(m.meta)+12)
	out = append(out, `{"_meta":{`...)
	out = append(out, m.meta...)
	out = append(out, '}')
	if string(bytes.TrimSpace(params[1:])) != "}" {
		out = append(out, ',')
	}
	return append(out, params[1:]...)
}

// merge returns the params object params, which has a _meta, with the
// triple's members in it: the params' own io.modelcontextprotocol/ keys
// give way, the others stay.
func (m *Request) merge(params []byte) []byte {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	meta := maps.Clone(m.metaKeys)
	var own map[string]json.RawMessage
	if json.Unmarshal(p["_meta"], &own) == nil {
		for k, v := range own {
			if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
				meta[k] = v
			}
		}
	}
	p["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(p)
	if err != nil {
		return params
	}
	return out
}

// nameFields maps the methods whose request names its target (Mcp-Name)
// to the params field that holds the name.
var nameFields = map[string]string{
	"tools/call":     "name",
	"prompts/get":    "name",
	"resources/read": "uri",
	"tasks/get":      "taskId", // the tasks extension
	"tasks/update":   "taskId",
	"tasks/cancel":   "taskId",
}

// Headers sets the standard headers of a request to a 2026-07-28 server:
// Mcp-Method, Mcp-Name and, for a tools/call, the Mcp-Param-* headers the
// caller did not send. An error means the request must not be sent.
func (m *Request) Headers(h http.Header, method string, params []byte) error {
	h["Mcp-Method"] = []string{method}
	field := nameFields[method]
	if field == "" {
		return nil
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return nil
	}
	var name string
	if json.Unmarshal(p[field], &name) == nil && name != "" {
		h["Mcp-Name"] = []string{name}
	}
	if method != "tools/call" {
		return nil
	}
	return m.paramHeaders(h, name, p["arguments"])
}

// paramHeaders sets the Mcp-Param-* headers of a tools/call of the tool
// name with arguments, when the server's annotations are known.
func (m *Request) paramHeaders(h http.Header, name string, arguments json.RawMessage) error {
	if m.annotations == nil {
		return nil
	}
	ix := m.annotations.Load()
	if ix == nil {
		return nil
	}
	return (*ix)[name].Set(h, arguments)
}
