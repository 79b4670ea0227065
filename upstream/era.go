package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/upstream/paramheader"
)

// Protocol eras of an upstream.
//
// An HTTP or stdio server is asked for the newest era both sides speak:
// server/discover at 2026-07-28 first, initialize at 2025-11-25 on anything
// but a modern answer (for stdio, on a restarted process when the first
// exited or fell silent: stdioera.go). The answer is remembered per server,
// so later sessions skip a probe that failed; Options.ProtocolVersion pins
// either era. SSE servers speak 2025-11-25 (the legacy SSE transport
// predates the revision).
//
// A 2026-07-28 server has no sessions (over stdio, a process still serves
// one call session, and cancellation stays notifications/cancelled): every
// request mcp-mux sends carries
// the _meta triple (protocol version, client info, and as client
// capabilities those of the caller, as a legacy call session declares
// them) and the standard headers (Mcp-Method, Mcp-Name with the raw name
// the request carries). Its list changes arrive on the discovery client's
// subscriptions/listen stream, which the SDK opens.

// Protocol versions an upstream can be pinned to.
const (
	VersionAuto   = ""           // negotiate (HTTP, stdio); 2025-11-25 on SSE
	VersionLegacy = "2025-11-25" // initialize and sessions
	VersionModern = "2026-07-28" // server/discover, sessionless
)

// sessionVersion is the ClientSessionOptions.ProtocolVersion for a new
// session. Unpinned, the first session of an HTTP server probes it with
// server/discover (through mcp-mux's own bounded reader, so a hostile
// answer is a fallback, not a crash); the answer holds for later ones.
func (d *dialing) sessionVersion(hdr http.Header) string {
	u := d.u
	switch {
	case u.opts.Transport != HTTP:
		return ProtocolVersion
	case u.opts.ProtocolVersion != VersionAuto:
		return u.opts.ProtocolVersion
	}
	if v := u.era.Load(); v != nil {
		return sessionEra(*v)
	}
	v, answered := d.probeHTTP(hdr)
	if !answered {
		// No answer at all (the server is not up yet): ask again next time.
		// (The error is not logged: it quotes the URL, credentials and all.)
		u.log.Debug("server/discover probe got no answer; using 2025-11-25")
		return v
	}
	u.era.Store(&v)
	u.log.Debug("negotiated the protocol era", "version", v)
	return v
}

// sessionEra is the version a new session asks for once the server's era
// is known (v, as its sessions negotiated it).
func sessionEra(v string) string {
	if v >= VersionModern {
		return VersionModern
	}
	return ProtocolVersion
}

// probeHTTP asks an HTTP server with server/discover (hdr its headers) and
// returns the version to use; answered is false when no answer came at all
// (neither a result, a JSON-RPC error nor an HTTP status).
func (d *dialing) probeHTTP(hdr http.Header) (v string, answered bool) {
	u := d.u
	pd := &direct{url: u.opts.URL, client: u.http, header: hdr, protocol: VersionModern, maxEvent: maxFrame,
		async: &u.async, modern: newModernRequest(discoveryCapsJSON())}
	raw, err := pd.call(d.connCtx, "server/discover", []byte("{}"), nil, func(*wire.Message) {})
	switch {
	case err == nil && listsModern(raw):
		return VersionModern, true
	case err != nil && !errors.As(err, new(*wire.Error)) && !errors.As(err, new(*StatusError)):
		return ProtocolVersion, false
	}
	return ProtocolVersion, true
}

// listsModern reports whether a server/discover result lists 2026-07-28.
func listsModern(result json.RawMessage) bool {
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	return json.Unmarshal(result, &res) == nil && slices.Contains(res.SupportedVersions, VersionModern)
}

func discoveryCapsJSON() string {
	b, _ := json.Marshal(mirrored{Roots: discoveryCaps.RootsV2, Sampling: discoveryCaps.Sampling, Elicitation: discoveryCaps.Elicitation})
	return string(b)
}

// Era returns the protocol version the server's sessions negotiated, or ""
// before the first one.
func (u *Upstream) Era() string {
	if v := u.era.Load(); v != nil {
		return *v
	}
	return ""
}

// modernRequest prepares one request to a 2026-07-28 server: the params
// with the _meta triple, and the standard headers.
type modernRequest struct {
	meta json.RawMessage // the _meta triple's members, without braces
	// annotations, when set, are the server's x-mcp-header bindings
	// (paramheader).
	annotations *atomic.Pointer[paramheader.Index]
}

func newModernRequest(caps string) *modernRequest {
	if caps == "" {
		caps = "{}"
	}
	return &modernRequest{meta: json.RawMessage(`"io.modelcontextprotocol/protocolVersion":"` + VersionModern + `",` +
		`"io.modelcontextprotocol/clientInfo":{"name":"mcp-mux","version":"1"},` +
		`"io.modelcontextprotocol/logLevel":"debug",` +
		`"io.modelcontextprotocol/clientCapabilities":` + caps)}
}

// params returns params with the _meta triple added (keys the params
// already carry in _meta are kept).
func (m *modernRequest) params(params []byte) []byte {
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
func (m *modernRequest) prepend(params []byte) []byte {
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
func (m *modernRequest) merge(params []byte) []byte {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params
	}
	meta := map[string]json.RawMessage{}
	_ = json.Unmarshal([]byte("{"+string(m.meta)+"}"), &meta)
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

// headers sets the standard headers of a request to a 2026-07-28 server:
// Mcp-Method, Mcp-Name and, for a tools/call, the Mcp-Param-* headers the
// caller did not send. An error means the request must not be sent.
func (m *modernRequest) headers(h http.Header, method string, params []byte) error {
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
func (m *modernRequest) paramHeaders(h http.Header, name string, arguments json.RawMessage) error {
	if m.annotations == nil {
		return nil
	}
	ix := m.annotations.Load()
	if ix == nil {
		return nil
	}
	return (*ix)[name].Set(h, arguments)
}
