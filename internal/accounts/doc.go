// Package accounts provides connected accounts: each user's own OAuth
// authorization of an upstream MCP server (the authorization-code flow
// with PKCE, as the MCP authorization spec describes it) and the vault of
// the tokens it yields. It is the engine only: the proxy asks the user,
// waits, and sends the tokens.
//
// # Flow
//
// Start runs inside a call that needs a token. Under the bounds it reserves
// a pending consent (the store refuses the MaxPendingPerUser-th+1 of one
// user and the MaxPending-th+1 of the fleet before any request is made),
// then discovers the server's authorization with go-sdk's oauthex and auth:
// the 401's challenges (or those of an unauthenticated probe), the
// protected resource metadata (RFC 9728; a document whose resource differs
// is an error, not skipped), the authorization server's metadata (RFC 8414
// or OIDC; none: the 2025-03-26 default endpoints). The client is the
// configured one, the mux's Client ID Metadata Document, or one registered
// dynamically (RFC 7591) and kept per (server, issuer). The scopes are the
// step-up's plus those granted, else the challenge's, the metadata's or the
// configured ones, with offline_access when the server lists it. The
// pending record (PKCE verifier included) is sealed in the store; the
// state parameter is a sealed token naming it. The caller shows the
// user Consent.URL and waits (Wait, or Result on a retry).
//
// The browser comes back to GET /oauth/callback on any replica: the state
// opens, the pending record is taken (single use), an error= fails the
// consent, the RFC 9207 iss is checked against the recorded issuer, the
// code is exchanged with the verifier and the resource (x/oauth2, on a
// client that follows no redirect, reads at most 1 MiB and gives up after
// 10 s), and the tokens are sealed in the vault. The result is stored
// and published, which wakes the waiting call wherever it waits.
//
// Token returns a user's token, refreshing it first when it is about to
// expire (one refresh per (user, server): singleflight here, a store lock
// across replicas; a rotated refresh token is kept; invalid_grant drops
// the entry). Rejected turns an upstream 401 or 403 into a retry, a
// step-up or ErrNotConnected.
//
// # Store
//
// RedisStore (shared by replicas; layout in its doc) or BoltStore (one
// process, Dir/accounts.db). A user is known to the store only by a keyed
// hash of its id (Sealer.MAC). Pending records, vault entries and client
// registrations are sealed (AES-GCM, seal.Purpose) bound to their key, so
// one copied under another user or server does not open. Without a
// shared request-state key the Sealer's key is random and the vault does
// not survive a restart.
//
// # Bounds
//
// Pending consents per user and in total, their lifetime (StateTTL), a
// vault entry's size (MaxRecord; one per user and configured server), the
// length of every caller-given value (user id, session, scopes, challenges,
// the callback's query), and the token responses read.
package accounts
