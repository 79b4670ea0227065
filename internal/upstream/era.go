package upstream

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcp-mux/mcp-mux/internal/upstream/modernreq"
	"github.com/mcp-mux/mcp-mux/internal/upstream/stdioproc"
	"github.com/mcp-mux/mcp-mux/internal/wire"
)

// Protocol eras of an upstream.
//
// An HTTP or stdio server is asked which eras it speaks: server/discover at
// 2026-07-28 first, initialize at 2025-11-25 on anything but a modern
// answer (for stdio, on a restarted process when the first exited:
// stdioera.go). The answer is remembered per server (an eraSet), so later
// sessions skip the probe; Options.ProtocolVersion pins either era. SSE
// servers speak 2025-11-25 (the legacy SSE transport predates the revision).
//
// A server whose server/discover lists both 2026-07-28 and an earlier
// version speaks both eras, and then a call session runs on its client's
// (Key.Era): a 2025-11-25 client's server can send it live sampling and
// elicitation requests, which go-sdk refuses during a 2026-07-28 request,
// and a 2026-07-28 client's gets input_required as it is. Only a server that
// speaks one era gets the clients of the other, bridged (package modern,
// callpath). The discovery session takes the newest era. Over HTTP a
// server's legacy era counts only if its initialize opens a session: a
// stateless go-sdk handler lists both eras but serves a legacy client
// throwaway sessions that cannot carry server-to-client requests, so its
// legacy clients are served on 2026-07-28 (and bridged) instead.
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

// eraSet is what a server was found to speak.
type eraSet struct {
	modern bool // 2026-07-28
	legacy bool // initialize and sessions (2025-11-25 and earlier)
}

// pick is the era of a new session for a client of era want ("" when the
// session has no client: the newest the server speaks).
func (s eraSet) pick(want string) string {
	if s.modern && (!s.legacy || want == "" || want >= VersionModern) {
		return VersionModern
	}
	return ProtocolVersion
}

// eraMemory is what a server was found to speak, once known.
type eraMemory struct {
	p   atomic.Pointer[eraSet]
	log hclog.Logger
}

func (m *eraMemory) load() *eraSet { return m.p.Load() }

// learn remembers what the server speaks.
func (m *eraMemory) learn(s eraSet) {
	m.p.Store(&s)
	m.log.Debug("negotiated the protocol era", "modern", s.modern, "legacy", s.legacy)
}

// note remembers the era of a session that negotiated v when no probe told
// what the server speaks (a pinned era, or a stdio server restarted for
// initialize).
func (m *eraMemory) note(v string) {
	s := &eraSet{modern: v >= VersionModern, legacy: v < VersionModern}
	if m.p.CompareAndSwap(nil, s) {
		m.log.Debug("negotiated the protocol era", "modern", s.modern, "legacy", s.legacy)
	}
}

// pinnedEra is the era every session of the server uses regardless of its
// client: the configured one, 2025-11-25 for SSE; "" negotiates.
func (o *Options) pinnedEra() string {
	if o.Transport == SSE {
		return ProtocolVersion
	}
	return o.ProtocolVersion
}

// want is the era of the session's client ("" for discovery: any).
func (d *dialing) want() string {
	if d.control {
		return ""
	}
	return d.c.key.Era
}

// sessionVersion is the ClientSessionOptions.ProtocolVersion for a new
// session. Unpinned, the first session of an HTTP server probes it with
// server/discover (through mcp-mux's own bounded reader, so a hostile
// answer is a fallback, not a crash); the answer holds for later ones.
func (d *dialing) sessionVersion(hdr http.Header) string {
	u := d.u
	if v := u.opts.pinnedEra(); v != VersionAuto {
		return v
	}
	if s := u.eras.load(); s != nil {
		return s.pick(d.want())
	}
	s, answered := d.probeHTTP(hdr)
	if !answered {
		// No answer at all (the server is not up yet): ask again next time.
		// (The error is not logged: it quotes the URL, credentials and all.)
		u.log.Debug("server/discover probe got no answer; using 2025-11-25")
		return ProtocolVersion
	}
	u.eras.learn(s)
	return s.pick(d.want())
}

// probeHTTP asks an HTTP server with server/discover (hdr its headers) and
// returns the eras it speaks; answered is false when no answer came at all
// (neither a result, a JSON-RPC error nor an HTTP status) or the server
// refused the credentials (401, 403: it said nothing of its eras, and a
// server that wants each user's token refuses every probe before one
// connects).
func (d *dialing) probeHTTP(hdr http.Header) (s eraSet, answered bool) {
	u := d.u
	pd := &direct{url: u.opts.URL, client: u.http, header: hdr, protocol: VersionModern, maxEvent: stdioproc.MaxFrame,
		async: &u.async, modern: modernreq.New(discoveryCapsJSON(), nil)}
	raw, err := pd.call(d.connCtx, "server/discover", []byte("{}"), nil, func(*wire.Message) {})
	status, refused := errors.AsType[*StatusError](err)
	switch {
	case err == nil:
		return discoverEras(raw), true
	case refused && (status.Code == http.StatusUnauthorized || status.Code == http.StatusForbidden):
		if d.control && u.opts.OnRefused != nil {
			u.opts.OnRefused(status) // discovery's own probe: what the server asks for
		}
		return eraSet{legacy: true}, false
	case !errors.As(err, new(*wire.Error)) && !refused:
		return eraSet{legacy: true}, false
	}
	return eraSet{legacy: true}, true
}

// discoverEras reads the eras a server/discover result lists: 2026-07-28,
// and any earlier version (which initialize negotiates). A result that does
// not list 2026-07-28 means initialize.
func discoverEras(result json.RawMessage) eraSet {
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(result, &res) != nil || !slices.Contains(res.SupportedVersions, VersionModern) {
		return eraSet{legacy: true}
	}
	return eraSet{modern: true, legacy: slices.ContainsFunc(res.SupportedVersions, func(v string) bool { return v != "" && v < VersionModern })}
}

// errLegacySessionless is a legacy session of an HTTP server that lists
// both eras but opened no session: dial again on 2026-07-28.
var errLegacySessionless = errors.New("the server's 2025-11-25 initialize opened no session")

// legacySessionless reports (and remembers) that cs, a legacy session of an
// HTTP server believed to speak both eras, has no session id: the server
// serves legacy clients sessionless (a stateless go-sdk handler), without
// server-to-client requests, so its legacy era is not used.
func (d *dialing) legacySessionless(cs *mcp.ClientSession) bool {
	u := d.u
	s := u.eras.load()
	if u.opts.Transport != HTTP || u.opts.pinnedEra() != VersionAuto || s == nil || !s.modern || !s.legacy ||
		cs.ID() != "" || cs.InitializeResult().ProtocolVersion >= VersionModern {
		return false
	}
	u.eras.learn(eraSet{modern: true})
	return true
}

func discoveryCapsJSON() string {
	b, _ := json.Marshal(mirrored{Roots: discoveryCaps.RootsV2, Sampling: discoveryCaps.Sampling, Elicitation: discoveryCaps.Elicitation, Extensions: discoveryUI})
	return string(b)
}

// Era returns the newest era the server speaks (VersionModern or
// VersionLegacy), or "" before it is known.
func (u *Upstream) Era() string { return u.EraFor("") }

// EraFor returns the era a call session of a client of era client runs on
// (VersionModern or VersionLegacy; "" for no client: the newest), or ""
// before the server's eras are known.
func (u *Upstream) EraFor(client string) string {
	if v := u.opts.pinnedEra(); v != VersionAuto {
		return v
	}
	if s := u.eras.load(); s != nil {
		return s.pick(client)
	}
	return ""
}

// spoken are the eras the server was found to speak, newest first
// (VersionModern, VersionLegacy), or just the pinned one; none before
// that is known.
func (m *eraMemory) spoken(pinned string) []string {
	s := m.load()
	switch {
	case pinned != VersionAuto:
		return []string{pinned}
	case s == nil:
		return nil
	case s.modern && s.legacy:
		return []string{VersionModern, VersionLegacy}
	case s.modern:
		return []string{VersionModern}
	}
	return []string{VersionLegacy}
}
