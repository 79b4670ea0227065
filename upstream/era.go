package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"

	"github.com/mcp-mux/mcp-mux/internal/wire"
	"github.com/mcp-mux/mcp-mux/upstream/modernreq"
	"github.com/mcp-mux/mcp-mux/upstream/stdioproc"
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
// request mcp-mux sends carries the _meta triple and the standard headers
// (modernreq). Its list changes arrive on the discovery client's
// subscriptions/listen stream, which the SDK opens.

// Protocol versions an upstream can be pinned to.
const (
	VersionAuto   = ""                // negotiate (HTTP, stdio); 2025-11-25 on SSE
	VersionLegacy = "2025-11-25"      // initialize and sessions
	VersionModern = modernreq.Version // server/discover, sessionless
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
	pd := &direct{url: u.opts.URL, client: u.http, header: hdr, protocol: VersionModern, maxEvent: stdioproc.MaxFrame,
		async: &u.async, modern: modernreq.New(discoveryCapsJSON(), nil)}
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
