package modern

import (
	"github.com/mcp-mux/mcp-mux/internal/seal"
)

// requestState envelopes (2026-07-28 multi-round-trip requests).
//
// A requestState travels through the client, so mcp-mux never hands one out
// bare: it seals what it needs on the retry (the upstream's own state, or
// where a bridged call is parked) with the caller, the server and an expiry
// (package seal: the format, the keys and the checks), so the client can
// neither read nor alter it. A retry whose state fails to open, is past its
// expiry, or names another caller or server is refused. Replicas share the
// key through inbound.request_state_key; without one each process generates
// its own, so a state only works on the replica that minted it.

// stateTTL is how long a requestState stays valid (and a bridged call stays
// parked for its retry).
const stateTTL = seal.StateTTL
