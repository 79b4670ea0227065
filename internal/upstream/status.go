package upstream

import (
	"net/http"

	"github.com/mcp-mux/mcp-mux/internal/secret"
)

// Upstream states, as State reports them.
const (
	// StateStarting: the first discovery has not finished yet.
	StateStarting = "starting"
	// StateUp: the last discovery succeeded.
	StateUp = "up"
	// StateRetrying: the last discovery failed; Err says why and discovery
	// retries with backoff.
	StateRetrying = "retrying"
)

// State returns StateStarting, StateUp or StateRetrying.
func (u *Upstream) State() string {
	select {
	case <-u.discovered:
	default:
		return StateStarting
	}
	if u.Err() != nil {
		return StateRetrying
	}
	return StateUp
}

// Transport returns the configured transport: Stdio, HTTP or SSE.
func (u *Upstream) Transport() string { return u.opts.Transport }

// Processes returns the number of running stdio server processes behind
// this upstream's open sessions (the discovery session's included).
func (u *Upstream) Processes() int { return u.conns.liveProcesses() }

// Reconnects returns how many times a session with the server was
// re-established after it ended: the discovery session, and call sessions
// retried because the request provably did not run.
func (u *Upstream) Reconnects() int64 { return u.reconnects.Load() }

// Scrubber removes the upstream's credentials, and the values of h, from
// text (for call content recorded by telemetry and audit).
func (u *Upstream) Scrubber(h http.Header) *secret.Scrubber { return u.scrubs.For(h) }
